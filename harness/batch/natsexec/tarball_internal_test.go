package natsexec

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/harness/config"
)

type entry struct {
	name, link, body string
	typ              byte
}

func archive(t *testing.T, es ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A worker's archive is hostile: nothing in it may write outside the run's
// directory, through a link, over a file, or as anything but plain files
// and directories.
func TestUnpackRefusesHostileArchives(t *testing.T) {
	const id = "20260101T000000Z-s3-abcdef01"
	dir := func(n string) entry { return entry{name: n, typ: tar.TypeDir} }
	file := func(n string) entry { return entry{name: n, typ: tar.TypeReg, body: "x"} }
	for _, c := range []struct {
		name    string
		entries []entry
	}{
		{"absolute name", []entry{dir(id + "/"), file("/tmp/evil")}},
		{"dot-dot", []entry{dir(id + "/"), file(id + "/../evil")}},
		{"outside the run directory", []entry{dir(id + "/"), file("other/evil")}},
		{"through a link", []entry{dir(id + "/"), {name: id + "/l", typ: tar.TypeSymlink, link: "/tmp"}, file(id + "/l/evil")}},
		{"over a file", []entry{dir(id + "/"), file(id + "/a"), file(id + "/a")}},
		{"hard link", []entry{dir(id + "/"), {name: id + "/h", typ: tar.TypeLink, link: "/etc/passwd"}}},
		{"device", []entry{dir(id + "/"), {name: id + "/d", typ: tar.TypeChar}}},
		{"no run directory", []entry{file(id)}},
		// A report that is a link to a FIFO on the coordinator's disk once
		// hung the coordinator in openat: no link is unpacked at all.
		{"report is a link to a FIFO", []entry{dir(id + "/"), {name: id + "/report.json", typ: tar.TypeSymlink, link: "/tmp/fifo"}}},
		{"a FIFO", []entry{dir(id + "/"), {name: id + "/report.json", typ: tar.TypeFifo}}},
		// A store that borrows objects would make the coordinator's
		// validation read an objects directory on its own disk (its runs'
		// closures, a repository of its own): a worker sends its store whole.
		{"a store that borrows objects", []entry{dir(id + "/"), dir(id + "/store/"), dir(id + "/store/objects/"), dir(id + "/store/objects/info/"),
			{name: id + "/store/objects/info/alternates", typ: tar.TypeReg, body: "../../../closures/" + strings.Repeat("a", 64) + "/objects\n"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "dest")
			_, _, err := unpack(context.Background(), bytes.NewReader(archive(t, c.entries...)), dest, id)
			if !errors.Is(err, ErrUnsafeTar) {
				t.Fatalf("unpack = %v, want ErrUnsafeTar", err)
			}
			if _, err := os.Lstat("/tmp/evil"); err == nil {
				t.Error("/tmp/evil was written")
			}
		})
	}
	if _, _, err := unpack(context.Background(), bytes.NewReader(nil), t.TempDir(), "../x"); !errors.Is(err, ErrUnsafeTar) {
		t.Errorf("a run id that is a path: %v", err)
	}
	// A good archive round-trips, the fixture left out.
	run := filepath.Join(t.TempDir(), id)
	for _, p := range []string{"report.json", "proofs/a.json", "fixture/secret.txt"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(run, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(run, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := pack(&b, run); err != nil {
		t.Fatal(err)
	}
	got, _, err := unpack(context.Background(), &b, t.TempDir(), id)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(got, "proofs", "a.json")); err != nil || string(data) != "proofs/a.json" {
		t.Errorf("proofs/a.json: %q %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(got, "fixture")); err == nil {
		t.Error("the fixture was packed")
	}
}

// A run directory holding a link is not packed: the coordinator would
// refuse it, so the worker says so at once.
func TestPackRefusesLinks(t *testing.T) {
	run := filepath.Join(t.TempDir(), "20260101T000000Z-s3-abcdef01")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(run, "report.json")); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := pack(&b, run); err == nil {
		t.Fatal("a run directory with a link was packed")
	}
}

// A cancelled unpack stops at once.
func TestUnpackHonoursCancel(t *testing.T) {
	const id = "20260101T000000Z-s3-abcdef01"
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := unpack(ctx, bytes.NewReader(archive(t, entry{name: id + "/", typ: tar.TypeDir})), t.TempDir(), id); !errors.Is(err, context.Canceled) {
		t.Fatalf("unpack after cancel = %v", err)
	}
}

// A worker's config, not the request, decides an agent's endpoint and key
// variable and bounds every allowlist: a request naming a worker variable
// as the key, an endpoint of its own, an agent kind the worker has no
// endpoint for, or an allowlist beyond the worker's network lists is
// refused with its reason.
func TestWorkerPolicyOwnsEndpointsAndAllowlists(t *testing.T) {
	var w Worker
	w.Local.Base.Config = config.Config{
		Network: &config.NetworkAllow{VerifyAllow: []string{"proxy.internal:3128"}},
		Worker:  &config.Worker{Agents: []config.WorkerAgent{{Kind: "qwen-code", BaseURL: "http://model.internal/v1", APIKeyEnv: "QWEN_KEY"}}},
	}
	for _, c := range []struct {
		name  string
		trial batch.Trial
		why   string // "" accepted
	}{
		{"the worker's own endpoint", batch.Trial{Agent: batch.Agent{Kind: "qwen-code"}}, ""},
		{"the same endpoint named", batch.Trial{Agent: batch.Agent{Kind: "qwen-code", BaseURL: "http://model.internal/v1", APIKeyEnv: "QWEN_KEY"}}, ""},
		{"a worker variable as the key", batch.Trial{Agent: batch.Agent{Kind: "qwen-code", APIKeyEnv: "NATS_CREDS"}}, "gives that agent only its own"},
		{"an endpoint of the request's", batch.Trial{Agent: batch.Agent{Kind: "qwen-code", BaseURL: "http://127.0.0.1:9/v1"}}, "gives that agent only its own"},
		{"an agent kind without an endpoint", batch.Trial{Agent: batch.Agent{Kind: "codex"}}, `no endpoint for agent kind "codex"`},
		{"the fake Case with an endpoint", batch.Trial{Agent: batch.Agent{BaseURL: "http://127.0.0.1:9"}}, "takes none"},
		{"an allowlist inside the worker's", batch.Trial{VerifyAllowNet: []string{"proxy.internal:3128"}}, ""},
		{"an allowlist beyond the worker's", batch.Trial{VerifyAllowNet: []string{"127.0.0.1:9"}}, "verify_allow_net names 127.0.0.1:9"},
		{"a case allowlist with none granted", batch.Trial{AllowNet: []string{"proxy.internal:3128"}}, "allow_net names proxy.internal:3128"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, why := w.policy(c.trial)
			if c.why == "" {
				if why != "" {
					t.Fatalf("refused: %s", why)
				}
				if c.trial.Agent.Kind == "qwen-code" && (got.Agent.BaseURL != "http://model.internal/v1" || got.Agent.APIKeyEnv != "QWEN_KEY") {
					t.Errorf("the agent runs with %q %q, not the worker's endpoint", got.Agent.BaseURL, got.Agent.APIKeyEnv)
				}
				return
			}
			if !strings.Contains(why, c.why) {
				t.Errorf("reason %q, want it to say %q", why, c.why)
			}
		})
	}
}
