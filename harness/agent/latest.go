package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// EnvRegistry overrides the npm registry asked for the latest releases.
const EnvRegistry = "CTO_HARNESS_NPM_REGISTRY"

// DefaultRegistry is the public npm registry.
const DefaultRegistry = "https://registry.npmjs.org"

// Latest asks the registry for the package's latest release (its "latest"
// dist-tag), within a few seconds: `agents list` says when a pin is behind.
func Latest(ctx context.Context, registry, pkg string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	u := strings.TrimSuffix(registry, "/") + "/" + url.PathEscape(pkg) + "/latest"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s answered %s", u, resp.Status)
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&v); err != nil || v.Version == "" {
		return "", fmt.Errorf("%s: no version in the answer", u)
	}
	return v.Version, nil
}

// Newer reports whether release a is newer than b, comparing the numeric
// dot-separated parts ("2.1.331" > "2.1.328"); a pre-release suffix is
// ignored.
func Newer(a, b string) bool {
	pa, pb := parts(a), parts(b)
	for i := 0; i < max(len(pa), len(pb)); i++ {
		x, y := at(pa, i), at(pb, i)
		if x != y {
			return x > y
		}
	}
	return false
}

func parts(v string) []int {
	v, _, _ = strings.Cut(v, "-")
	var out []int
	for _, p := range strings.Split(v, ".") {
		n, _ := strconv.Atoi(p)
		out = append(out, n)
	}
	return out
}

func at(p []int, i int) int {
	if i < len(p) {
		return p[i]
	}
	return 0
}
