package schemas_test

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/schemas"
)

// The dry-run schema's profile mirrors profile.Record field for field, and
// every profile in the table validates against it.
func TestDryRunProfileSchema(t *testing.T) {
	doc := loadDoc(t, schemas.DryRun)
	defs := doc.root["$defs"].(map[string]any)
	prof := defs["Profile"].(map[string]any)
	var names []string
	for k := range prof["properties"].(map[string]any) {
		names = append(names, k)
	}
	var tags []string
	typ := reflect.TypeFor[profile.Record]()
	for i := 0; i < typ.NumField(); i++ {
		tags = append(tags, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
	}
	sort.Strings(names)
	sort.Strings(tags)
	if !reflect.DeepEqual(names, tags) {
		t.Fatalf("schema profile properties %v, profile.Record fields %v", names, tags)
	}
	if d := setDiff(tags, stringList(prof["required"])); d != "" {
		t.Errorf("profile required: %s", d)
	}
	enum := stringList(prof["properties"].(map[string]any)["name"].(map[string]any)["enum"])
	if d := setDiff(profile.Names(), enum); d != "" {
		t.Errorf("profile name enum: %s", d)
	}
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range profile.All() {
		plan := map[string]any{"status": "dry_run", "stage": 1, "blockers": []any{}, "steps": []any{}, "source": "", "source_clean": true,
			"copy_target": "", "task_contract": nil, "commands": []any{}, "profile": p.Record(), "verification": map[string]any{},
			"unsandboxed": false, "allow_dangerous": false, "toolchains_found": []any{}, "warnings": []any{}}
		data, _ := json.Marshal(plan)
		if err := set.Validate(schemas.DryRun, data); err != nil {
			t.Errorf("profile %s: %v", p.Name, err)
		}
		// The Go form (CamelCase, nanoseconds) is what the schema exists to refuse.
		plan["profile"] = p
		data, _ = json.Marshal(plan)
		if set.Validate(schemas.DryRun, data) == nil {
			t.Errorf("profile %s printed with Go field names passed the schema", p.Name)
		}
	}
}
