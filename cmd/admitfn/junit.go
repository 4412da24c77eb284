package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// The JUnit XML that CI systems read (GitHub via test-reporter actions,
// GitLab's artifacts:reports:junit, Jenkins): one testsuite per test file,
// one testcase per case, a failure element for each failed case and an
// error element for a file that did not load.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// junitLoadCase names the testcase that stands for a file that did not load.
const junitLoadCase = "(load the test file)"

func writeJUnit(w io.Writer, results []caseResult, fileErrs []fileError) error {
	out := junitSuites{Name: "admitfn test"}
	suites := map[string]*junitSuite{}
	var order []string
	suite := func(file string) *junitSuite {
		if s, ok := suites[file]; ok {
			return s
		}
		suites[file] = &junitSuite{Name: file}
		order = append(order, file)
		return suites[file]
	}
	millis := map[string]float64{}
	for _, fe := range fileErrs {
		s := suite(fe.File)
		first, _, _ := strings.Cut(fe.Error, "\n")
		s.Cases = append(s.Cases, junitCase{Name: junitLoadCase, ClassName: fe.File, Time: "0.000", Error: &junitProblem{Message: first, Type: "load", Text: fe.Error}})
		s.Tests++
		s.Errors++
	}
	for _, r := range results {
		s := suite(r.File)
		jc := junitCase{Name: r.Name, ClassName: r.File, Time: seconds(r.Millis)}
		if !r.Passed {
			first, _, _ := strings.Cut(r.Failures[0], "\n")
			jc.Failure = &junitProblem{Message: first, Type: "mismatch", Text: strings.Join(r.Failures, "\n")}
			s.Failures++
		}
		s.Cases = append(s.Cases, jc)
		s.Tests++
		millis[r.File] += r.Millis
	}
	total := 0.0
	for _, file := range order {
		s := suites[file]
		s.Time = seconds(millis[file])
		total += millis[file]
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Errors += s.Errors
		out.Suites = append(out.Suites, *s)
	}
	out.Time = seconds(total)
	return out.write(w)
}

// write prints the report as an XML document.
func (s junitSuites) write(w io.Writer) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(millis float64) string { return fmt.Sprintf("%.3f", millis/1000) }
