package profile

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated table in docs/execution-profiles.md")

const (
	docPath    = "../../docs/execution-profiles.md"
	beginTable = "<!-- BEGIN GENERATED: profile.Markdown() -->\n"
	endTable   = "<!-- END GENERATED -->"
)

// The doc's table is generated from All(); this keeps the two identical.
func TestDocMatchesTable(t *testing.T) {
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, beginTable), strings.Index(doc, endTable)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated section", docPath)
	}
	got := doc[i+len(beginTable) : j]
	if got == Markdown() {
		return
	}
	if *update {
		doc = doc[:i+len(beginTable)] + Markdown() + doc[j:]
		if err := os.WriteFile(filepath.Clean(docPath), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s is out of date; run go test ./harness/profile -run TestDocMatchesTable -update\n got:\n%s\nwant:\n%s", docPath, got, Markdown())
}

func TestTableIsSane(t *testing.T) {
	seen := map[Name]bool{}
	for _, p := range All() {
		if seen[p.Name] {
			t.Errorf("duplicate profile %s", p.Name)
		}
		seen[p.Name] = true
		if p.MaxCaseCommands < 1 || p.MaxTestRuns < 1 || p.HeavyWeight < 1 || p.TestBudget <= 0 || p.FlakeReruns < 0 || p.Description == "" ||
			p.MaxCaseEvents < 1 || p.MaxEventBytes < 1<<20 {
			t.Errorf("%s has an unusable limit: %+v", p.Name, p)
		}
		if p.RunTests && 1+p.FlakeReruns > p.MaxTestRuns {
			t.Errorf("%s allows %d reruns but only %d test runs", p.Name, p.FlakeReruns, p.MaxTestRuns)
		}
	}
	for _, n := range []Name{Strict, Fast, Smoke, Yolo} {
		if !seen[n] {
			t.Errorf("profile %s missing", n)
		}
	}
	strict, _ := Lookup("strict")
	fast, _ := Lookup("fast")
	smoke, _ := Lookup("smoke")
	yolo, _ := Lookup("yolo")
	if !(strict.MaxCaseCommands > fast.MaxCaseCommands && fast.MaxCaseCommands > smoke.MaxCaseCommands) ||
		!(strict.TestBudget > fast.TestBudget && fast.TestBudget > smoke.TestBudget) {
		t.Error("strict must be the most generous and smoke the tightest")
	}
	if !strict.AllowInstalls || fast.AllowInstalls || smoke.AllowInstalls || !yolo.AllowInstalls {
		t.Error("installs: allowed in strict and yolo only")
	}
	if smoke.Qualifies || yolo.Qualifies || !strict.Qualifies || !fast.Qualifies {
		t.Error("smoke and yolo never qualify as stage evidence")
	}
	if smoke.RunTests || smoke.MaxHeavy != 0 {
		t.Error("smoke runs no tests and no heavy commands")
	}
	// All returns a copy.
	a := All()
	a[0].MaxCaseCommands = -1
	if All()[0].MaxCaseCommands == -1 {
		t.Error("All exposes the table")
	}
}

func TestLookup(t *testing.T) {
	p, err := Lookup("")
	if err != nil || p.Name != Fast {
		t.Fatalf("default: %+v %v", p, err)
	}
	if p, err := Lookup("strict"); err != nil || p.Name != Strict {
		t.Fatalf("strict: %+v %v", p, err)
	}
	_, err = Lookup("turbo")
	if err == nil {
		t.Fatal("unknown profile accepted")
	}
	for _, n := range Names() {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not list %s", err, n)
		}
	}
	if _, err := Lookup("Strict"); err == nil {
		t.Fatal("names are case-sensitive")
	}
}

func TestIsInstall(t *testing.T) {
	yes := []string{
		"pip install -r requirements.txt", "pip3 install requests", "python -m pip install -e .", "python3.12 -m pip install x",
		"npm install", "npm i lodash", "npm ci", "npm add x", "pnpm add -D vitest", "pnpm install", "yarn add react", "yarn",
		"go install golang.org/x/tools/cmd/goimports@latest", "go get example.com/m@v1", "go mod download",
		"apt-get install -y jq", "sudo apt install jq", "apk add curl", "cargo install ripgrep", "gem install rails",
		"brew install jq", "uv pip install x", "poetry add x", "bun add x", "npx playwright install --with-deps",
		"cd web && npm ci && npm test", "env CI=1 npm install", "pip3.11 install x", "pacman -S vim", "conda install numpy",
	}
	no := []string{
		"go test ./...", "npm test", "npm run build", "pytest -q", "pip list", "pip --version", "go build ./...",
		"yarn test", "echo npm install", "cargo build", "apt-cache search jq", "uv run pytest", "go mod tidy -diff",
		"printf 'pip install x'", "git commit -m 'npm install'",
	}
	for _, c := range yes {
		if !IsInstall(c) {
			t.Errorf("IsInstall(%q) = false", c)
		}
	}
	for _, c := range no {
		if IsInstall(c) {
			t.Errorf("IsInstall(%q) = true", c)
		}
	}
}

func TestWeight(t *testing.T) {
	fast, _ := Lookup("fast")
	heavy := []string{"pip install x", "playwright install chromium", "flet run main.py", "pytest --cov=src", "pytest -q --cov",
		"go test -race ./...", "docker build -t x .", "npm run build", "python -m pytest --cov", "ruff check --fix ."}
	light := []string{"go test ./...", "pytest -q", "ls", "git status", "npm test", "docker ps", "echo flet run"}
	for _, c := range heavy {
		if w := Weight(fast, c); w != fast.HeavyWeight {
			t.Errorf("Weight(%q) = %d, want %d", c, w, fast.HeavyWeight)
		}
	}
	for _, c := range light {
		if w := Weight(fast, c); w != 1 {
			t.Errorf("Weight(%q) = %d, want 1", c, w)
		}
	}
	if Weight(Policy{HeavyWeight: 0}, "pip install x") != 1 {
		t.Error("a heavy command never weighs less than 1")
	}
}

func TestIsTest(t *testing.T) {
	for _, c := range []string{"go test ./...", "pytest", "python -m pytest -q", "npm test", "npm run test:unit", "node --test", "cargo test", "make test"} {
		if !IsTest(c) {
			t.Errorf("IsTest(%q) = false", c)
		}
	}
	for _, c := range []string{"go build", "npm run build", "node index.js", "make", "echo pytest"} {
		if IsTest(c) {
			t.Errorf("IsTest(%q) = true", c)
		}
	}
}

func TestCounterBudget(t *testing.T) {
	smoke, _ := Lookup("smoke")
	c := NewCounter(smoke)
	for i := 0; i < smoke.MaxCaseCommands; i++ {
		if ok, reason := c.Command("ls"); !ok {
			t.Fatalf("command %d refused: %s", i+1, reason)
		}
	}
	ok, reason := c.Command("ls")
	if ok || !strings.HasPrefix(reason, ReasonBudget) || !strings.Contains(reason, "smoke") {
		t.Fatalf("over budget: %v %q", ok, reason)
	}
	u := c.Usage()
	if u.Used != smoke.MaxCaseCommands || u.Commands != smoke.MaxCaseCommands || u.Refused != 1 {
		t.Fatalf("usage %+v", u)
	}
}

func TestCounterInstallsAndHeavy(t *testing.T) {
	fast, _ := Lookup("fast")
	c := NewCounter(fast)
	if ok, reason := c.Command("pip install requests"); ok || !strings.HasPrefix(reason, ReasonInstall) {
		t.Fatalf("install in fast: %v %q", ok, reason)
	}
	if c.Usage().Used != 0 {
		t.Fatal("a refused command cost budget")
	}
	for i := 0; i < fast.MaxHeavy; i++ {
		if ok, reason := c.Command("docker build ."); !ok {
			t.Fatalf("heavy %d refused: %s", i+1, reason)
		}
	}
	if ok, reason := c.Command("go test -race ./..."); ok || !strings.HasPrefix(reason, ReasonHeavy) {
		t.Fatalf("heavy over cap: %v %q", ok, reason)
	}
	if got, want := c.Usage().Used, fast.MaxHeavy*fast.HeavyWeight; got != want {
		t.Fatalf("used %d, want %d", got, want)
	}

	strict, _ := Lookup("strict")
	s := NewCounter(strict)
	for _, cmd := range []string{"pip install -r requirements.txt", "npm ci", "playwright install"} {
		if ok, reason := s.Command(cmd); !ok {
			t.Fatalf("strict refused %q: %s", cmd, reason)
		}
	}
	yolo, _ := Lookup("yolo")
	if ok, reason := NewCounter(yolo).Command("pip install x"); !ok {
		t.Fatalf("yolo refused an install: %s", reason)
	}
	smoke, _ := Lookup("smoke")
	if ok, reason := NewCounter(smoke).Command("npm run build"); ok || !strings.HasPrefix(reason, ReasonHeavy) {
		t.Fatalf("smoke heavy: %v %q", ok, reason)
	}
}

func TestCounterTests(t *testing.T) {
	fast, _ := Lookup("fast")
	c := NewCounter(fast)
	for i := 0; i < fast.MaxTestRuns; i++ {
		if ok, reason := c.Command("go test ./..."); !ok {
			t.Fatalf("test run %d refused: %s", i+1, reason)
		}
	}
	if ok, reason := c.Command("pytest -q"); ok || !strings.HasPrefix(reason, ReasonTests) {
		t.Fatalf("test over cap: %v %q", ok, reason)
	}
}

func TestCounterConcurrent(t *testing.T) {
	strict, _ := Lookup("strict")
	c := NewCounter(strict)
	var wg sync.WaitGroup
	var mu sync.Mutex
	okCount := 0
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _ := c.Command("ls"); ok {
				mu.Lock()
				okCount++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if okCount != strict.MaxCaseCommands || c.Usage().Used != strict.MaxCaseCommands {
		t.Fatalf("ok %d, usage %+v", okCount, c.Usage())
	}
}

// The agent profile allows installs only when a package registry is on the
// allowlist; other profiles are what their row says.
func TestForEndpoints(t *testing.T) {
	a, _ := Lookup(string(Agent))
	if a.AllowInstalls {
		t.Fatal("the agent profile allows installs without a registry")
	}
	if ForEndpoints(a, []string{"api.example.com:443"}).AllowInstalls {
		t.Error("a model endpoint allowed installs")
	}
	if !ForEndpoints(a, []string{"registry.npmjs.org:443"}).AllowInstalls {
		t.Error("the npm registry on the allowlist did not allow installs")
	}
	f, _ := Lookup(string(Fast))
	if ForEndpoints(f, []string{"registry.npmjs.org:443"}).AllowInstalls {
		t.Error("fast allowed installs")
	}
	if DefaultFor(true) != Agent || DefaultFor(false) != Fast {
		t.Error("defaults")
	}
}
