package config_test

import (
	"testing"

	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/schemas"
)

func TestSigningConfig(t *testing.T) {
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	v := set.Validator(schemas.Config)
	c, err := config.Parse([]byte(`{"owned_sources":[],"target_repository_roots":[],
		"signing":{"key_file":"/k/signing.key","trusted_keys":["/k/old.pub","/k/new.pub"],"worker_keys":["/k/w1.pub"]}}`), "cfg", v)
	if err != nil {
		t.Fatal(err)
	}
	if c.Signing.KeyFile != "/k/signing.key" || len(c.Signing.TrustedKeys) != 2 || len(c.Signing.WorkerKeys) != 1 {
		t.Errorf("signing = %+v", c.Signing)
	}
	for name, doc := range map[string]string{
		"relative key file":      `{"owned_sources":[],"target_repository_roots":[],"signing":{"key_file":"k/signing.key"}}`,
		"relative trusted key":   `{"owned_sources":[],"target_repository_roots":[],"signing":{"trusted_keys":["signing.pub"]}}`,
		"relative worker key":    `{"owned_sources":[],"target_repository_roots":[],"signing":{"worker_keys":["w1.pub"]}}`,
		"unknown field":          `{"owned_sources":[],"target_repository_roots":[],"signing":{"key":"/k"}}`,
		"disabled, no reason":    `{"owned_sources":[],"target_repository_roots":[],"signing":{"disabled":true}}`,
		"disabled, empty reason": `{"owned_sources":[],"target_repository_roots":[],"signing":{"disabled":true,"disabled_reason":""}}`,
		"disabled with a key":    `{"owned_sources":[],"target_repository_roots":[],"signing":{"disabled":true,"disabled_reason":"x","key_file":"/k/signing.key"}}`,
	} {
		if _, err := config.Parse([]byte(doc), "cfg", v); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if c, err := config.Parse([]byte(`{"owned_sources":[],"target_repository_roots":[],"signing":{"disabled":true,"disabled_reason":"offline box"}}`), "cfg", v); err != nil || !c.Signing.Disabled || c.Signing.DisabledReason != "offline box" {
		t.Errorf("the opt-out with a reason: %+v %v", c.Signing, err)
	}
	if c, err := config.Parse([]byte(`{"owned_sources":[],"target_repository_roots":[]}`), "cfg", v); err != nil || c.Signing.KeyFile != "" {
		t.Errorf("no signing section: %+v %v", c.Signing, err)
	}
}

// agent.stall_seconds is read, and a zero, negative or absurd value is
// refused by the schema rather than taken as "never stall".
func TestAgentStallSeconds(t *testing.T) {
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	validate := set.Validator(schemas.Config)
	for _, c := range []struct {
		stall string
		ok    bool
		want  int
	}{{"", true, 0}, {`,"stall_seconds":40`, true, 40}, {`,"stall_seconds":0`, false, 0}, {`,"stall_seconds":-5`, false, 0},
		{`,"stall_seconds":3600`, false, 0}, {`,"stall_seconds":"15"`, false, 0}} {
		data := `{"owned_sources":[],"target_repository_roots":[],"agent":{"name":"codex"` + c.stall + `}}`
		cfg, err := config.Parse([]byte(data), "test", validate)
		if (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok=%v", data, err, c.ok)
			continue
		}
		if err == nil && cfg.Agent.StallSeconds != c.want {
			t.Errorf("%s: stall_seconds %d, want %d", data, cfg.Agent.StallSeconds, c.want)
		}
	}
}

// worker.slots is read; zero, negative, absurd and non-integer values are
// refused by the schema rather than taken as the default.
func TestWorkerSlots(t *testing.T) {
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	validate := set.Validator(schemas.Config)
	for _, c := range []struct {
		slots string
		ok    bool
		want  int
	}{{"", true, 0}, {`"slots":24`, true, 24}, {`"slots":0`, false, 0}, {`"slots":-1`, false, 0}, {`"slots":100000`, false, 0},
		{`"slots":2.5`, false, 0}, {`"slots":"8"`, false, 0}} {
		data := `{"owned_sources":[],"target_repository_roots":[],"worker":{` + c.slots + `}}`
		cfg, err := config.Parse([]byte(data), "test", validate)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok %v", c.slots, err, c.ok)
			continue
		}
		if err == nil && cfg.Worker.Slots != c.want {
			t.Errorf("%s: slots %d, want %d", c.slots, cfg.Worker.Slots, c.want)
		}
	}
}
