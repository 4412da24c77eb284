package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	corecluster "github.com/admitfn/admitfn/core/cluster"
)

// Defaults of a cluster's settings.
const (
	DefaultNamespaceTTL  = 10 * time.Second
	DefaultAuthorizerTTL = 10 * time.Second
	DefaultParamTTL      = 10 * time.Second
	DefaultCacheEntries  = 4096
	DefaultMaxInFlight   = 64
	DefaultReadTimeout   = 10 * time.Second
)

// Config is the clusters a deployment serves.
type Config struct {
	Clusters []Cluster `json:"clusters"`
}

// Cluster is one cluster: its name (the webhook URL's), and optionally how
// to read it. A cluster without access is served with what the request
// carries, as without --cluster.
type Cluster struct {
	Name string `json:"name"`

	// Server and its CA, for a token file, EKS or GKE.
	Server                   string `json:"server,omitempty"`
	CertificateAuthority     string `json:"certificateAuthority,omitempty"`
	CertificateAuthorityData string `json:"certificateAuthorityData,omitempty"`

	// Kubeconfig (and Context in it) holds everything.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
	// TokenFile holds a bearer token, re-read as it rotates.
	TokenFile string `json:"tokenFile,omitempty"`
	// EKS makes tokens from the function's AWS credentials.
	EKS *EKS `json:"eks,omitempty"`
	// GKE uses the function's Google service account.
	GKE *GKE `json:"gke,omitempty"`

	NamespaceTTL  Duration `json:"namespaceTTL,omitempty"`
	AuthorizerTTL Duration `json:"authorizerTTL,omitempty"`
	ParamTTL      Duration `json:"paramTTL,omitempty"`
	CacheEntries  int      `json:"cacheEntries,omitempty"`
	MaxInFlight   int      `json:"maxInFlight,omitempty"`
	ReadTimeout   Duration `json:"readTimeout,omitempty"`
}

// EKS names the EKS cluster a token is for.
type EKS struct {
	ClusterName string `json:"clusterName"`
	Region      string `json:"region,omitempty"`
}

// GKE asks for the function's Google credentials (Application Default
// Credentials).
type GKE struct{}

// HasAccess reports whether the function reads the cluster.
func (c Cluster) HasAccess() bool {
	return c.Kubeconfig != "" || c.TokenFile != "" || c.EKS != nil || c.GKE != nil
}

func (c Cluster) withDefaults() Cluster {
	set := func(d *Duration, v time.Duration) {
		if d.Duration == 0 {
			d.Duration = v
		}
	}
	set(&c.NamespaceTTL, DefaultNamespaceTTL)
	set(&c.AuthorizerTTL, DefaultAuthorizerTTL)
	set(&c.ParamTTL, DefaultParamTTL)
	set(&c.ReadTimeout, DefaultReadTimeout)
	if c.CacheEntries == 0 {
		c.CacheEntries = DefaultCacheEntries
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	return c
}

// ParseConfig reads ADMITFN_CLUSTERS: a comma-separated list of names (the
// clusters served, none read), a YAML or JSON document (`clusters:` …) or
// the path of a file holding one. "" is no clusters: the function serves
// the URLs without a cluster, as before.
func ParseConfig(v string, readFile func(string) ([]byte, error)) (Config, error) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return Config{}, nil
	case strings.ContainsAny(v, ":{\n"):
		return parseDocument([]byte(v))
	}
	// A path: no cluster name has a slash or a dot, so a value with one
	// is read as a file, and so is one that names a file that exists.
	why := ""
	switch ext := path.Ext(v); {
	case strings.Contains(v, "/"):
		why = "it has a slash"
	case ext == ".yaml" || ext == ".yml" || ext == ".json":
		why = "it ends in " + ext
	}
	data, err := readFile(v)
	switch {
	case err == nil && !strings.Contains(v, ","):
		return parseDocument(data)
	case why != "":
		return Config{}, fmt.Errorf("clusters: %q is read as a file (%s): %w", v, why, err)
	}
	var c Config
	for _, name := range strings.Split(v, ",") {
		c.Clusters = append(c.Clusters, Cluster{Name: strings.TrimSpace(name)})
	}
	return c, c.validate()
}

func parseDocument(data []byte) (Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(bytes.TrimSpace(data), &c); err != nil {
		return Config{}, fmt.Errorf("clusters: %w", err)
	}
	return c, c.validate()
}

func (c Config) validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, cl := range c.Clusters {
		at := fmt.Sprintf("clusters[%d]", i)
		if !corecluster.ValidName(cl.Name) {
			errs = append(errs, fmt.Errorf("%s: name %q: want a DNS label (a-z, 0-9 and -, at most 63)", at, clip(cl.Name, 70)))
			continue
		}
		at = fmt.Sprintf("cluster %q", cl.Name)
		if seen[cl.Name] {
			errs = append(errs, fmt.Errorf("%s: named twice", at))
		}
		seen[cl.Name] = true
		auth := 0
		for _, set := range []bool{cl.Kubeconfig != "", cl.TokenFile != "", cl.EKS != nil, cl.GKE != nil} {
			if set {
				auth++
			}
		}
		if auth > 1 {
			errs = append(errs, fmt.Errorf("%s: set one of kubeconfig, tokenFile, eks and gke", at))
		}
		if auth == 1 && cl.Kubeconfig == "" && cl.Server == "" {
			errs = append(errs, fmt.Errorf("%s: server is required with tokenFile, eks or gke", at))
		}
		if cl.EKS != nil && cl.EKS.ClusterName == "" {
			errs = append(errs, fmt.Errorf("%s: eks.clusterName is required", at))
		}
		for _, d := range []Duration{cl.NamespaceTTL, cl.AuthorizerTTL, cl.ParamTTL, cl.ReadTimeout} {
			if d.Duration < 0 {
				errs = append(errs, fmt.Errorf("%s: durations cannot be negative", at))
				break
			}
		}
		if cl.CacheEntries < 0 || cl.MaxInFlight < 0 {
			errs = append(errs, fmt.Errorf("%s: cacheEntries and maxInFlight cannot be negative", at))
		}
	}
	return errors.Join(errs...)
}

// Names are the clusters' names, in order.
func (c Config) Names() []string {
	var out []string
	for _, cl := range c.Clusters {
		out = append(out, cl.Name)
	}
	return out
}

// restConfig is how client-go reaches the cluster: never with anything
// but what the configuration names.
func (c Cluster) restConfig(auth Authenticators) (*rest.Config, error) {
	s := c.withDefaults()
	var cfg *rest.Config
	if c.Kubeconfig != "" {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig}
		var err error
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
		if err != nil {
			// clientcmd's errors name files and contexts, never their
			// contents.
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		if c.Server != "" {
			cfg.Host = c.Server
		}
	} else {
		cfg = &rest.Config{Host: c.Server}
		cfg.TLSClientConfig.CAFile = c.CertificateAuthority
		if c.CertificateAuthorityData != "" {
			cfg.TLSClientConfig.CAData = []byte(c.CertificateAuthorityData)
		}
		switch {
		case c.TokenFile != "":
			if _, err := os.Stat(c.TokenFile); err != nil {
				return nil, fmt.Errorf("tokenFile: %w", err)
			}
			cfg.BearerTokenFile = c.TokenFile
		case c.EKS != nil:
			if auth.EKS == nil {
				return nil, errors.New("eks: this function does not make EKS tokens; use a kubeconfig or tokenFile")
			}
			cfg.WrapTransport = Bearer(auth.EKS(*c.EKS))
		case c.GKE != nil:
			if auth.GKE == nil {
				return nil, errors.New("gke: this function does not make GKE tokens; use a kubeconfig or tokenFile")
			}
			cfg.WrapTransport = Bearer(auth.GKE(*c.GKE))
		}
	}
	cfg.Timeout = s.ReadTimeout.Duration
	return cfg, nil
}

// Open builds a reader for every cluster with access, with the
// authenticators the entry point links; the others map to nil.
func Open(c Config, auth Authenticators) (map[string]*Reader, error) {
	out := map[string]*Reader{}
	for _, cl := range c.Clusters {
		if !cl.HasAccess() {
			out[cl.Name] = nil
			continue
		}
		cfg, err := cl.restConfig(auth)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", cl.Name, err)
		}
		r, err := NewReader(cl, cfg)
		if err != nil {
			return nil, err
		}
		out[cl.Name] = r
	}
	return out, nil
}
