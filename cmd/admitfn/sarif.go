package main

import (
	"io"
	"path/filepath"

	"github.com/admitfn/admitfn/core/lint"
	"github.com/admitfn/admitfn/core/version"
)

// SARIF 2.1.0 (https://docs.oasis-open.org/sarif/sarif/v2.1.0/), the subset
// code-scanning UIs read: the tool and its rules, and each result's rule,
// level, message and location.
type sarifLog struct {
	Version string     `json:"version"`
	Schema  string     `json:"$schema"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID                   string       `json:"id"`
	ShortDescription     sarifMessage `json:"shortDescription"`
	DefaultConfiguration struct {
		Level string `json:"level"`
	} `json:"defaultConfiguration"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	RuleIndex int             `json:"ruleIndex"`
	Level     string          `json:"level"`
	Message   sarifMessage    `json:"message"`
	Locations []sarifLocation `json:"locations"`
}

type sarifLocation struct {
	PhysicalLocation struct {
		ArtifactLocation struct {
			URI string `json:"uri"`
		} `json:"artifactLocation"`
		Region *sarifRegion `json:"region,omitempty"`
	} `json:"physicalLocation"`
	LogicalLocations []sarifLogical `json:"logicalLocations,omitempty"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

type sarifLogical struct {
	FullyQualifiedName string `json:"fullyQualifiedName"`
}

func writeSARIF(w io.Writer, findings []finding) error {
	rules := append([]lint.Rule{loadRule}, lint.Rules...)
	index := map[string]int{}
	driver := sarifDriver{Name: "admitfn", Version: version.Get().Version, InformationURI: "https://github.com/admitfn/admitfn"}
	for i, r := range rules {
		sr := sarifRule{ID: r.ID, ShortDescription: sarifMessage{r.Summary}}
		sr.DefaultConfiguration.Level = string(r.Severity)
		driver.Rules = append(driver.Rules, sr)
		index[r.ID] = i
	}
	results := []sarifResult{}
	for _, f := range findings {
		res := sarifResult{RuleID: f.Rule, RuleIndex: index[f.Rule], Level: f.Severity, Message: sarifMessage{f.Message}}
		var loc sarifLocation
		if f.File != "" {
			loc.PhysicalLocation.ArtifactLocation.URI = filepath.ToSlash(f.File)
			if f.Line > 0 {
				loc.PhysicalLocation.Region = &sarifRegion{StartLine: f.Line}
			}
		} else {
			loc.PhysicalLocation.ArtifactLocation.URI = filepath.ToSlash(f.Bundle)
		}
		if f.Object != "" {
			name := f.Object
			if f.Field != "" {
				name += "/" + f.Field
			}
			loc.LogicalLocations = []sarifLogical{{name}}
		}
		res.Locations = []sarifLocation{loc}
		results = append(results, res)
	}
	return writeJSON(w, sarifLog{
		Version: "2.1.0",
		Schema:  "https://json.schemastore.org/sarif-2.1.0.json",
		Runs:    []sarifRun{{Tool: sarifTool{driver}, Results: results}},
	})
}
