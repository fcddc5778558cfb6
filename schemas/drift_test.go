package schemas_test

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/profile"
	"github.com/cto-harness/cto-harness/harness/scan"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/testresults"
	"github.com/cto-harness/cto-harness/harness/toolenv"
	"github.com/cto-harness/cto-harness/harness/verify"
	"github.com/cto-harness/cto-harness/schemas"
)

// goTypes binds every kind that mirrors a Go type to that type. StageResult
// has no Go type here (it is printed by a command); it is checked against the
// field list of its specification instead.
func goTypes() map[schemas.Kind]reflect.Type {
	return map[schemas.Kind]reflect.Type{
		schemas.Report:       reflect.TypeFor[ctoharness.Report](),
		schemas.Event:        reflect.TypeFor[ctoharness.Event](),
		schemas.Trace:        reflect.TypeFor[ctoharness.TraceEntry](),
		schemas.SourceProof:  reflect.TypeFor[ctoharness.SourceProof](),
		schemas.NonMutation:  reflect.TypeFor[ctoharness.NonMutationProof](),
		schemas.FixtureProof: reflect.TypeFor[ctoharness.FixtureProof](),
		schemas.TaskSpec:     reflect.TypeFor[task.Spec](),
		schemas.TaskContract: reflect.TypeFor[task.Contract](),
		schemas.Config:       reflect.TypeFor[config.Config](),
		schemas.StageRecord:  reflect.TypeFor[gates.Record](),

		schemas.RunPredicate:         reflect.TypeFor[attest.RunPredicate](),
		schemas.StageRecordPredicate: reflect.TypeFor[attest.StageRecordPredicate](),
		schemas.NetworkRecord:        reflect.TypeFor[ctoharness.NetworkRecord](),
		schemas.BatchSpec:            reflect.TypeFor[batch.Spec](),
		schemas.Batch:                reflect.TypeFor[batch.Summary](),
		schemas.Tests:                reflect.TypeFor[testresults.File](),
		schemas.TaskCheck:            reflect.TypeFor[ctoharness.TaskCheck](),
		schemas.Claims:               reflect.TypeFor[ctoharness.Claims](),
	}
}

// textEnums are the root's enumerated types held as numbers that encode
// as text (encoding.TextMarshaler): their constants are iota's, so their
// names come from the All* list, each encoded, and the test below checks
// that list against the names the type decodes.
var textEnums = map[string]bool{"EntryType": true}

// texts is each value's encoded text; a value that does not encode fails.
func texts[T encoding.TextMarshaler](t *testing.T, xs []T) []string {
	t.Helper()
	out := make([]string, len(xs))
	for i, x := range xs {
		b, err := x.MarshalText()
		if err != nil {
			t.Fatalf("%T %v does not encode: %v", x, x, err)
		}
		out[i] = string(b)
	}
	return out
}

func strs[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}

// rootConsts parses the root package's source and returns, per type name, the
// string constants declared with that type. It lets the test catch a constant
// that was added to the Go code but not to an All* list or a schema enum.
func rootConsts(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				id, ok := vs.Type.(*ast.Ident)
				if !ok || textEnums[id.Name] {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: constant of type %s is not a string literal; teach rootConsts about it", fset.Position(v.Pos()), id.Name)
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[id.Name] = append(out[id.Name], s)
				}
			}
		}
	}
	return out
}

// goEnums maps each enumerated Go string type to its complete value list.
func goEnums(t *testing.T) map[reflect.Type][]string {
	consts := rootConsts(t)
	lists := map[reflect.Type][]string{
		reflect.TypeFor[ctoharness.BlockerCode](): strs(ctoharness.AllBlockerCodes()),
		reflect.TypeFor[ctoharness.Step]():        strs(ctoharness.AllSteps()),
		reflect.TypeFor[ctoharness.EventType]():   strs(ctoharness.AllEventTypes()),
		reflect.TypeFor[ctoharness.TraceOp]():     strs(ctoharness.AllTraceOps()),
		reflect.TypeFor[ctoharness.TestClass]():   strs(ctoharness.AllTestClasses()),
		reflect.TypeFor[ctoharness.Outcome]():     strs(ctoharness.AllOutcomes()),
		reflect.TypeFor[testresults.Format]():     strs(testresults.Formats()),
		reflect.TypeFor[testresults.Outcome]():    strs(testresults.Outcomes()),
		// No All* function exists for these; the declared constants are the list.
		reflect.TypeFor[ctoharness.Status]():      consts["Status"],
		reflect.TypeFor[ctoharness.Backend]():     consts["Backend"],
		reflect.TypeFor[ctoharness.Lane]():        consts["Lane"],
		reflect.TypeFor[ctoharness.ChangeKind]():  consts["ChangeKind"],
		reflect.TypeFor[ctoharness.EntryType]():   texts(t, ctoharness.AllEntryTypes()),
		reflect.TypeFor[ctoharness.StatusRoute](): consts["StatusRoute"],
		reflect.TypeFor[ctoharness.CostSource]():  consts["CostSource"],
	}
	return lists
}

// TestGoListsComplete checks that every All* list (and every constant-derived
// list) names exactly the constants declared with its type, so that a new
// constant cannot slip past the schema enums.
func TestGoListsComplete(t *testing.T) {
	consts := rootConsts(t)
	for typ, list := range goEnums(t) {
		if typ.PkgPath() != reflect.TypeFor[ctoharness.Outcome]().PkgPath() {
			continue // the root's constants are read here; other packages test their own lists
		}
		if textEnums[typ.Name()] {
			continue // TestTextEnumsComplete
		}
		if d := setDiff(consts[typ.Name()], list); d != "" {
			t.Errorf("Go list for %s differs from its declared constants: %s", typ.Name(), d)
		}
		if len(list) == 0 {
			t.Errorf("no values found for %s", typ.Name())
		}
	}
}

// TestTextEnumsComplete: every value of a text enum's type up to the
// first that does not encode is in its All* list, each name decodes to its
// value, and a name outside the list is refused, so a new constant cannot
// slip past the schema enum.
func TestTextEnumsComplete(t *testing.T) {
	all := ctoharness.AllEntryTypes()
	var got []ctoharness.EntryType
	for v := ctoharness.EntryType(1); v != 0; v++ {
		b, err := v.MarshalText()
		if err != nil {
			break
		}
		got = append(got, v)
		var back ctoharness.EntryType
		if err := back.UnmarshalText(b); err != nil || back != v {
			t.Errorf("EntryType %q decodes to %v, %v", b, back, err)
		}
	}
	if !slices.Equal(got, all) {
		t.Errorf("the EntryType values that encode are %v; AllEntryTypes lists %v", got, all)
	}
	var v ctoharness.EntryType
	if v.UnmarshalText([]byte("future-kind")) == nil {
		t.Error("an EntryType name outside the list was read")
	}
	if _, err := v.MarshalText(); err == nil {
		t.Error("the zero EntryType encodes")
	}
}

// plainEnums are enums on fields typed plain string in Go (no constants to
// compare with), keyed by kind and JSON path.
var plainEnums = map[string][]string{
	"source-proof:/kind":                   {"before", "after"},
	"fixture-proof:/kind":                  {"clean_start", "clean_end"},
	"fixture-proof:/git_changes/[]/change": {ctoharness.GitChangeAdded, ctoharness.GitChangeRemoved, ctoharness.GitChangeChanged},
	"report:/profile":                      profile.Names(),
	"report:/adversarial/tests/[]/class":   {ctoharness.AdversaryDiscriminating, ctoharness.AdversaryNotDiscriminating, ctoharness.AdversaryFailedImport},
	"batch:/tests/[]/list":                 {batch.ListFailToPass, batch.ListPassToPass},
	"report:/adversarial/confirmed":        {ctoharness.ConfirmedAuto, ctoharness.ConfirmedTerminal, ctoharness.ConfirmedDeclined},
	"report:/tests/profile":                profile.Names(),
	"report:/tests/refusal": {string(verify.RefusedGovernance), string(verify.RefusedProfile), string(verify.RefusedDangerous),
		string(verify.RefusedScope), string(verify.RefusedBudget), string(verify.RefusedDryRun)},
	"report:/tests/scope_reason": verify.ScopeReasons(),
	"report:/sandbox/view/mounts/[]/kind": {ctoharness.ViewBind, ctoharness.ViewTmpfs, ctoharness.ViewMask, ctoharness.ViewProc,
		ctoharness.ViewDevice, ctoharness.ViewSymlink, ctoharness.ViewOverlay},
	"report:/sandbox/view/mounts/[]/mode": {ctoharness.ViewRO, ctoharness.ViewRW},
	"report:/sandbox/verification_view/mounts/[]/kind": {ctoharness.ViewBind, ctoharness.ViewTmpfs, ctoharness.ViewMask, ctoharness.ViewProc,
		ctoharness.ViewDevice, ctoharness.ViewSymlink, ctoharness.ViewOverlay},
	"report:/sandbox/verification_view/mounts/[]/mode": {ctoharness.ViewRO, ctoharness.ViewRW},
	"report:/agent/name":                 agent.Names(),
	"batch-spec:/agents/[]/kind":         agent.Names(),
	"batch-spec:/profile":                profile.Names(),
	"batch-spec:/agents/[]/scripted":     batch.ScriptedModes(),
	"batch:/cells/[]/cost_basis":         batch.CostBases(),
	"batch:/agents/[]/cost_basis":        batch.CostBases(),
	"batch:/trial_list/[]/outcome":       append(strs(batch.AllOutcomes()), batch.Pending),
	"config:/agent/name":                 agent.Names(),
	"config:/env/[]/for/[]":              {toolenv.ForCase, toolenv.ForSetup, toolenv.ForVerification},
	"task-spec:/agent/name":              agent.Names(),
	"task-spec:/adversary/agent/name":    agent.Names(),
	"report:/adversarial/agent/name":     agent.Names(),
	"report:/tests/findings/[]/severity": {string(scan.Low), string(scan.Medium), string(scan.High), string(scan.Critical)},
	"network-record:/command":            {string(egress.CommandCase), string(egress.CommandVerify), string(egress.CommandSetup), string(egress.CommandAdversary)},
	"network-record:/via":                {egress.ViaDirect, egress.ViaConnect, egress.ViaHTTPProxy, egress.ViaSyscall, egress.ViaSocket},
	"network-record:/protocol":           {egress.ProtoTCP, egress.ProtoUDP, egress.ProtoICMP, egress.ProtoOther},
	"network-record:/decision":           {egress.Allowed, egress.Denied, egress.Failed},
	"network-record:/limit":              {"", egress.LimitConnections, egress.LimitBytes},
	"report:/network/limits/exceeded/[]": {egress.LimitConnections, egress.LimitBytes, egress.LimitRecords},
	"task-spec:/fixture_git":             {task.FixtureGitBlock, task.FixtureGitAllow},
	"task-contract:/fixture_git":         {task.FixtureGitBlock, task.FixtureGitAllow},

	// A failure is of any class but pass.
	"batch:/agents/[]/failures/[]/outcome": strs(batch.AllOutcomes()[1:]),
}

func setDiff(want, got []string) string {
	var missing, extra, dup []string
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
		if seen[g] == 2 {
			dup = append(dup, g)
		}
	}
	w := map[string]bool{}
	for _, x := range want {
		w[x] = true
		if seen[x] == 0 {
			missing = append(missing, x)
		}
	}
	for _, g := range got {
		if !w[g] {
			extra = append(extra, g)
		}
	}
	if len(missing)+len(extra)+len(dup) == 0 {
		return ""
	}
	return fmt.Sprintf("missing %q, extra %q, duplicated %q", missing, extra, dup)
}

// --- schema walking ---

type schemaDoc struct {
	kind schemas.Kind
	root map[string]any
}

func loadDoc(t *testing.T, k schemas.Kind) *schemaDoc {
	t.Helper()
	src, err := schemas.Source(k)
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(src, &root); err != nil {
		t.Fatalf("%s: %v", k.FileName(), err)
	}
	return &schemaDoc{kind: k, root: root}
}

func (d *schemaDoc) at(t *testing.T, ref string) map[string]any {
	t.Helper()
	if !strings.HasPrefix(ref, "#/") {
		t.Fatalf("%s: only local $refs are supported, got %q", d.kind.FileName(), ref)
	}
	var cur any = d.root
	for _, seg := range strings.Split(ref[2:], "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: $ref %q does not resolve", d.kind.FileName(), ref)
		}
		cur = m[seg]
	}
	m, ok := cur.(map[string]any)
	if !ok {
		t.Fatalf("%s: $ref %q does not resolve to a schema object", d.kind.FileName(), ref)
	}
	return m
}

func (d *schemaDoc) resolve(t *testing.T, n map[string]any, loc string) (map[string]any, string) {
	t.Helper()
	for range 16 {
		ref, ok := n["$ref"].(string)
		if !ok {
			return n, loc
		}
		n, loc = d.at(t, ref), ref
	}
	t.Fatalf("%s: $ref chain too long at %s", d.kind.FileName(), loc)
	return nil, ""
}

func types(n map[string]any) []string {
	switch v := n["type"].(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			s, _ := x.(string)
			out = append(out, s)
		}
		sort.Strings(out)
		return out
	}
	return nil
}

func stringList(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

type jsonField struct {
	name      string
	omitempty bool
	typ       reflect.Type
}

// jsonFields lists a struct's JSON fields as encoding/json sees them.
func jsonFields(t *testing.T, typ reflect.Type) []jsonField {
	var out []jsonField
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(t, ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero"), typ: f.Type})
	}
	return out
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// drift walks a Go type and its schema together.
type drift struct {
	t     *testing.T
	doc   *schemaDoc
	enums map[reflect.Type][]string

	quiet       bool            // collect paths only; TestDrift reports the mismatches
	enumLocs    map[string]bool // schema locations whose enum was compared with Go
	arrays      []string        // JSON paths of array fields (never null)
	structPaths []string        // JSON paths (outside arrays and maps) of struct objects
}

func (w *drift) errorf(path, format string, args ...any) {
	w.t.Helper()
	if w.quiet {
		return
	}
	if path == "" {
		path = "(root)"
	}
	w.t.Errorf("%s %s: %s", w.doc.kind, path, fmt.Sprintf(format, args...))
}

func (w *drift) wantType(path string, n map[string]any, want string, nullable bool) {
	w.t.Helper()
	got := types(n)
	exp := []string{want}
	if nullable {
		exp = []string{want, "null"}
		sort.Strings(exp)
	}
	if !slices.Equal(got, exp) {
		w.errorf(path, "schema type %v, want %v", got, exp)
	}
}

func (w *drift) walk(path string, typ reflect.Type, n map[string]any, loc string, nullable bool) {
	w.t.Helper()
	if n == nil {
		w.errorf(path, "no schema")
		return
	}
	n, loc = w.doc.resolve(w.t, n, loc)

	if typ.Kind() == reflect.Pointer {
		if slices.Contains(types(n), "null") {
			w.walk(path, typ.Elem(), n, loc, true)
			return
		}
		for _, comb := range []string{"oneOf", "anyOf"} {
			branches, ok := n[comb].([]any)
			if !ok {
				continue
			}
			var other map[string]any
			var otherLoc string
			hasNull := false
			for i, b := range branches {
				bm, _ := b.(map[string]any)
				if slices.Equal(types(bm), []string{"null"}) && len(bm) == 1 {
					hasNull = true
					continue
				}
				other, otherLoc = bm, fmt.Sprintf("%s/%s/%d", loc, comb, i)
			}
			if !hasNull || len(branches) != 2 {
				w.errorf(path, "pointer field: %s must be [null, schema]", comb)
				return
			}
			w.walk(path, typ.Elem(), other, otherLoc, false)
			return
		}
		w.errorf(path, "Go pointer field but the schema does not allow null")
		return
	}

	if typ.Kind() != reflect.String && typ.Implements(reflect.TypeFor[encoding.TextMarshaler]()) {
		w.wantType(path, n, "string", nullable) // a number that encodes as its name
		w.checkEnum(path, typ, n, loc)
		return
	}
	switch {
	case typ == timeType:
		w.wantType(path, n, "string", nullable)
		if n["format"] != "date-time" {
			w.errorf(path, "time.Time needs format date-time, got %v", n["format"])
		}
		return
	case typ == rawType:
		w.wantType(path, n, "object", nullable)
		return
	}

	switch typ.Kind() {
	case reflect.Struct:
		w.wantType(path, n, "object", nullable)
		if !strings.Contains(path, "[]") && !strings.Contains(path, "{}") {
			w.structPaths = append(w.structPaths, path)
		}
		if ap, ok := n["additionalProperties"].(bool); !ok || ap {
			w.errorf(path, "struct object needs additionalProperties: false")
		}
		props, _ := n["properties"].(map[string]any)
		fields := jsonFields(w.t, typ)
		var names, req []string
		for _, f := range fields {
			names = append(names, f.name)
			if !f.omitempty {
				req = append(req, f.name)
			}
		}
		var schemaNames []string
		for k := range props {
			schemaNames = append(schemaNames, k)
		}
		if d := setDiff(names, schemaNames); d != "" {
			w.errorf(path, "properties differ from %s json tags: %s", typ.Name(), d)
		}
		if d := setDiff(req, stringList(n["required"])); d != "" {
			w.errorf(path, "required differs from the non-omitempty fields of %s: %s", typ.Name(), d)
		}
		for _, f := range fields {
			p, _ := props[f.name].(map[string]any)
			if p == nil {
				continue // reported above
			}
			w.walk(path+"/"+f.name, f.typ, p, loc+"/properties/"+f.name, false)
		}
	case reflect.Slice, reflect.Array:
		w.wantType(path, n, "array", nullable)
		w.arrays = append(w.arrays, path)
		items, _ := n["items"].(map[string]any)
		w.walk(path+"/[]", typ.Elem(), items, loc+"/items", false)
	case reflect.Map:
		if typ.Key().Kind() != reflect.String {
			w.errorf(path, "map key %s is not a string", typ.Key())
		}
		w.wantType(path, n, "object", nullable)
		ap, _ := n["additionalProperties"].(map[string]any)
		w.walk(path+"/{}", typ.Elem(), ap, loc+"/additionalProperties", false)
	case reflect.String:
		w.wantType(path, n, "string", nullable)
		w.checkEnum(path, typ, n, loc)
	case reflect.Bool:
		w.wantType(path, n, "boolean", nullable)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.wantType(path, n, "integer", nullable)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		w.wantType(path, n, "integer", nullable)
		if m, ok := n["minimum"].(float64); !ok || m < 0 {
			w.errorf(path, "unsigned Go field needs minimum >= 0")
		}
	case reflect.Float32, reflect.Float64:
		w.wantType(path, n, "number", nullable)
	default:
		w.errorf(path, "unsupported Go kind %s", typ.Kind())
	}
}

func (w *drift) checkEnum(path string, typ reflect.Type, n map[string]any, loc string) {
	w.t.Helper()
	enum, hasEnum := n["enum"]
	want, typed := w.enums[typ]
	if !typed {
		want, typed = plainEnums[string(w.doc.kind)+":"+path]
	}
	switch {
	case typed && !hasEnum:
		w.errorf(path, "%s values are enumerated in Go but the schema has no enum", typ.Name())
	case !typed && hasEnum:
		w.errorf(path, "schema enum %v has no Go list to be checked against", enum)
	case typed:
		w.enumLocs[loc] = true
		if d := setDiff(want, stringList(enum)); d != "" {
			w.errorf(path, "schema enum differs from the Go list of %s: %s", typ.Name(), d)
		}
	}
}

// enumLocations finds every enum keyword in a schema document.
func enumLocations(v any, loc string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["enum"]; ok {
			out[loc] = true
		}
		for k, c := range x {
			k = strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			enumLocations(c, loc+"/"+k, out)
		}
	case []any:
		for i, c := range x {
			enumLocations(c, fmt.Sprintf("%s/%d", loc, i), out)
		}
	}
}

func walkKind(t *testing.T, k schemas.Kind, typ reflect.Type, quiet bool) *drift {
	t.Helper()
	w := &drift{t: t, doc: loadDoc(t, k), enums: goEnums(t), enumLocs: map[string]bool{}, quiet: quiet}
	w.walk("", typ, w.doc.root, "#", false)
	return w
}

// TestDrift keeps every schema in step with its Go type: property names,
// required fields, types, and enums.
func TestDrift(t *testing.T) {
	for k, typ := range goTypes() {
		t.Run(string(k), func(t *testing.T) {
			w := walkKind(t, k, typ, false)
			all := map[string]bool{}
			enumLocations(w.doc.root, "#", all)
			for loc := range all {
				if !w.enumLocs[loc] {
					t.Errorf("%s: enum at %s is not checked against any Go list", k.FileName(), loc)
				}
			}
		})
	}
}

func TestEveryKindHasATypeOrSpec(t *testing.T) {
	gt := goTypes()
	for _, k := range schemas.Kinds() {
		if _, ok := gt[k]; !ok && k != schemas.StageResult && k != schemas.DryRun && k != schemas.CaseEvent {
			t.Errorf("kind %s has no Go type bound in goTypes()", k)
		}
	}
}

// TestArrayFieldsNeverNull lists, and checks, the array fields whose writers
// must emit [] rather than null: the schema types them as array only.
func TestArrayFieldsNeverNull(t *testing.T) {
	for _, k := range schemas.Kinds() {
		typ, ok := goTypes()[k]
		if !ok {
			continue
		}
		w := walkKind(t, k, typ, true)
		t.Logf("%s: arrays never null: %s", k, strings.Join(w.arrays, ", "))
	}
}

func TestStageResultFields(t *testing.T) {
	doc := loadDoc(t, schemas.StageResult)
	props, _ := doc.root["properties"].(map[string]any)
	var names []string
	for k := range props {
		names = append(names, k)
	}
	want := []string{"ok", "checked", "errors", "pass_artifact_path", "failure_artifact_paths",
		"source_non_mutation_proof_path", "health", "stage", "record_path", "signed", "key_id", "signature_ok"}
	if d := setDiff(want, names); d != "" {
		t.Errorf("stage-result properties: %s", d)
	}
	wantReq := []string{"ok", "checked", "errors", "pass_artifact_path", "failure_artifact_paths", "source_non_mutation_proof_path", "signed"}
	if d := setDiff(wantReq, stringList(doc.root["required"])); d != "" {
		t.Errorf("stage-result required: %s", d)
	}
	if doc.root["additionalProperties"] != false {
		t.Errorf("stage-result needs additionalProperties false")
	}
}

// --- instances ---

const (
	runID   = "run-20250301T101500Z-7f3a"
	hashA   = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad3b18e512dba79e4c8300dd08"
	hashB   = "a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3"
	commitA = "9fceb02d0ae598e95dc970b74767f19372d61af8"
	treeA   = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	commitB = "1c9b2f3e4d5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c"
	treeB   = "d8329fc1cc938780ffdd9f94e0d364e0ea74f579"
)

var (
	t0 = time.Date(2025, 3, 1, 10, 15, 0, 123456789, time.UTC)
	t1 = t0.Add(97 * time.Second)
)

func intp(i int) *int { return &i }

func passReport() ctoharness.Report {
	return ctoharness.Report{
		SchemaVersion:           ctoharness.SchemaVersion,
		RunID:                   runID,
		Stage:                   3,
		StageName:               "copied owned repo",
		Status:                  ctoharness.StatusPass,
		Outcome:                 ctoharness.OutcomePass,
		Backend:                 ctoharness.BackendCase,
		CaseLane:                ctoharness.LaneReal,
		CaseProcessStarted:      true,
		SourceRepositoryMutated: false,
		SourceNonMutation:       ctoharness.NonMutationRef{Checked: true, ProofPath: "proofs/source-non-mutation.json"},
		SourcePath:              "/home/dev/src/owned-tool",
		Policy: ctoharness.Policy{OwnedSources: []string{"/home/dev/src"}, TargetRoots: []string{"/srv/targets"},
			ExternalRoots: []string{}},
		RuntimeWorkspaceRoot: "/var/tmp/cto-harness/work",
		RunArtifactDir:       "/var/tmp/cto-harness/runs/" + runID,
		FixturePath:          "/var/tmp/cto-harness/work/" + runID + "/fixture",
		Commits: ctoharness.Commits{SourceHead: commitA, SourceTree: treeA, BaselineCommit: commitB,
			BaselineTree: treeA, ResultCommit: "0123456789abcdef0123456789abcdef01234567", ResultTree: treeB},
		AllowedPaths: []string{"cmd/**", "README.md"},
		ChangedFiles: []ctoharness.ChangedFile{
			{Path: "cmd/tool/main.go", Change: ctoharness.ChangeModified, Allowed: true},
			{Path: "cmd/tool/version.go", Change: ctoharness.ChangeAdded, Allowed: true},
		},
		Blockers: []ctoharness.Blocker{},
		Case: ctoharness.CaseRecord{
			Argv:     []string{"/usr/local/bin/case", "run", "--contract", "task.json"},
			EnvKeys:  []string{"HOME", "PATH", "TMPDIR"},
			ExitCode: intp(0), DurationMs: 41250, TimeoutSeconds: 600, Events: 7,
			StdoutInline: `{"type":"case.started"}`, StderrInline: "",
		},
		Tests: ctoharness.TestsRecord{
			Command: "go test ./...", ExitCode: intp(0), Classification: ctoharness.TestPass,
			Counts: &ctoharness.TestCounts{Passed: 42, Skipped: 1}, DurationMs: 8800, TimeoutSeconds: 300,
			LogPath: "logs/verification.log", Target: "./...", Profile: "fast",
			Findings: []ctoharness.ScanFinding{}, Scripts: []string{},
		},
		Sandbox: ctoharness.SandboxRecord{
			Enforced: true, Mechanisms: []string{"landlock", "process_group", "env_allowlist"}, LandlockABI: 4,
			WritableRoots:    []string{"/var/tmp/cto-harness/work/" + runID + "/fixture", "/var/tmp/cto-harness/work/" + runID + "/scratch"},
			ReadOnlyRoots:    []string{"/"},
			EnvAllowlist:     []string{"HOME", "PATH", "TMPDIR"},
			ProcessGroupKill: true,
		},
		Profile:   "fast",
		Qualifies: true,
		ArtifactDigests: map[string]string{
			"events.normalized.jsonl": hashA, "trace.jsonl": hashB, "proofs/source-before.json": hashA,
		},
		Freshness: ctoharness.Freshness{RunID: runID, Nonce: "b5b2c1d08e7f4a3c", StartedAt: t0, FinishedAt: t1,
			HarnessVersion: ctoharness.Version, FinalEventHash: hashB, Events: 19},
	}
}

// gateBlockedReport is a run refused at the gate: nothing was copied or started.
func gateBlockedReport() ctoharness.Report {
	return ctoharness.Report{
		SchemaVersion: ctoharness.SchemaVersion, RunID: runID, Stage: 2, StageName: "artificial fixture",
		Status: ctoharness.StatusBlocked, Outcome: ctoharness.OutcomePolicyBlocked, Backend: ctoharness.BackendCase, CaseLane: ctoharness.LaneFake,
		SourceNonMutation:    ctoharness.NonMutationRef{},
		Policy:               ctoharness.Policy{OwnedSources: []string{}, TargetRoots: []string{}, ExternalRoots: []string{}},
		RuntimeWorkspaceRoot: "/var/tmp/cto-harness/work", RunArtifactDir: "/var/tmp/cto-harness/runs/" + runID,
		AllowedPaths: []string{}, ChangedFiles: []ctoharness.ChangedFile{},
		Blockers: []ctoharness.Blocker{
			{Code: ctoharness.BlockAllowCaseMissing, Step: ctoharness.StepGate, Message: "the case backend is disabled: set CTO_HARNESS_ALLOW_CASE=1"},
			{Code: ctoharness.BlockPrevStageMissing, Step: ctoharness.StepGate, Message: "no stage 1 validation record"},
		},
		Case: ctoharness.CaseRecord{Argv: []string{}, EnvKeys: []string{}},
		Tests: ctoharness.TestsRecord{Classification: ctoharness.TestNotRun, Reason: "the run was blocked at the gate",
			Profile: "fast", Findings: []ctoharness.ScanFinding{}, Scripts: []string{}},
		Profile:         "fast",
		Sandbox:         ctoharness.SandboxRecord{Mechanisms: []string{}, WritableRoots: []string{}, ReadOnlyRoots: []string{}, EnvAllowlist: []string{}, NotEnforcedReason: "no process was started"},
		ArtifactDigests: map[string]string{},
		Freshness: ctoharness.Freshness{RunID: runID, Nonce: "b5b2c1d08e7f4a3c", StartedAt: t0, FinishedAt: t0.Add(time.Second),
			HarnessVersion: ctoharness.Version, FinalEventHash: hashA, Events: 3},
	}
}

// fakeFailedReport is stage 1 (fake backend) whose verification failed.
func fakeFailedReport() ctoharness.Report {
	r := passReport()
	r.Stage, r.StageName = 1, "evidence interface"
	r.Backend, r.CaseLane, r.CaseProcessStarted = ctoharness.BackendFake, ctoharness.LaneNone, false
	r.SourcePath = ""
	r.Status, r.Outcome = ctoharness.StatusFailed, ctoharness.OutcomeAgentFailed
	r.Qualifies = false
	r.Case = ctoharness.CaseRecord{Argv: []string{}, EnvKeys: []string{}, ExitCode: nil}
	r.ChangedFiles = []ctoharness.ChangedFile{{Path: "secrets.txt", Change: ctoharness.ChangeDeleted, Allowed: false, Reason: "outside the allowed paths cmd/**"}}
	r.Tests.ExitCode, r.Tests.Classification, r.Tests.Counts = intp(1), ctoharness.TestFailure, nil
	r.Blockers = []ctoharness.Blocker{{Code: ctoharness.BlockTestsFailed, Step: ctoharness.StepVerify, Message: "go test ./... exited 1"}}
	return r
}

func sourceProof() ctoharness.SourceProof {
	return ctoharness.SourceProof{
		SchemaVersion: ctoharness.SchemaVersion, RunID: runID, Kind: "before", Root: "/home/dev/src/owned-tool",
		TakenAt: t0, Head: ctoharness.HeadState{SymbolicRef: "refs/heads/main", Commit: commitA, Tree: treeA},
		RefsDigest: hashA, RefCount: 4, StatusClean: true, Status: []ctoharness.StatusEntry{}, StatusRoute: ctoharness.StatusRouteFast, Deep: true,
		ManifestDigest: hashB,
		Manifest: []ctoharness.ManifestEntry{
			{Path: ".", Type: ctoharness.EntryDir, Mode: 0o40755, Size: 4096, MtimeNs: 1740823000000000000, CtimeNs: 1740823000000000000, Inode: 1311},
			{Path: "README.md", Type: ctoharness.EntryFile, Mode: 0o100644, Size: 812, MtimeNs: 1740823000000000001, CtimeNs: 1740823000000000002, Inode: 18446744073709551615, EntryExtra: &ctoharness.EntryExtra{Digest: hashB}},
			{Path: "docs/link", Type: ctoharness.EntrySymlink, Mode: 0o120777, Size: 9, MtimeNs: 1, CtimeNs: 2, Inode: 1313, EntryExtra: &ctoharness.EntryExtra{LinkTarget: "../README.md"}},
			{Path: "run/sock", Type: ctoharness.EntryOther, Mode: 0o140755, MtimeNs: 1, CtimeNs: 2, Inode: 1314},
		},
	}
}

func instances() []struct {
	name string
	kind schemas.Kind
	v    any
} {
	spec := task.Spec{
		Task: "Add a --version flag that prints the build version", AllowedPaths: []string{"cmd/**", "README.md"},
		ForbiddenActions: []string{"delete tests"}, Verification: task.Verification{Command: "go test ./...", TimeoutSeconds: 300},
		CaseTimeoutSeconds: 600,
	}
	rec := gates.Record{SchemaVersion: ctoharness.SchemaVersion, Stage: 2, RunID: runID, RunDir: "/var/tmp/cto-harness/runs/" + runID, RunsDir: "/var/tmp/cto-harness/runs",
		ReportSHA256: hashA, ValidatedAt: t1, HarnessVersion: ctoharness.Version,
		Checked: []string{"report schema", "event chain", "trace confinement", "source non-mutation"}}
	rec.Seal()
	mutatedProof := ctoharness.NonMutationProof{SchemaVersion: ctoharness.SchemaVersion, RunID: runID, BeforeDigest: hashA, AfterDigest: hashB,
		HeadEqual: true, RefsEqual: true, StatusEqual: false, ManifestEqual: false, Mutated: true, DifferenceCount: 2,
		Differences: []ctoharness.Difference{{Path: "README.md", Field: "ctime_ns", Before: "1", After: "2"}, {Path: "", Field: "status", Before: "clean", After: "M README.md"}}}
	return []struct {
		name string
		kind schemas.Kind
		v    any
	}{
		{"pass", schemas.Report, passReport()},
		{"batch spec", schemas.BatchSpec, batch.Spec{Name: "nightly", Sources: []string{"repos/a"}, Tasks: []batch.TaskRef{{Name: "note"}, {Name: "fix", Spec: "tasks/fix.json"}},
			Agents: []batch.Agent{{Name: "fake"}, {Name: "qwen", Kind: "qwen-code", Model: "m", BaseURL: "http://127.0.0.1:1/v1", APIKeyEnv: "KEY",
				Price: &batch.Price{InputPerMTok: 1, OutputPerMTok: 2}}}, Repeats: 3, Profile: "fast", Concurrency: 2, MaxAttempts: 3}},
		{"batch summary", schemas.Batch, batchSummary()},
		{"per-test results", schemas.Tests, testresults.File{SchemaVersion: testresults.FileVersion, RunID: runID, Format: testresults.JUnit, Path: "report.xml",
			Tests: []testresults.Result{{ID: "tests.test_duration.test_plus", Outcome: testresults.Fail, DurationMs: 12, Output: "assert 1 == 2"},
				{ID: "tests.test_duration.test_minus", Outcome: testresults.Pass, DurationMs: 3}}}},
		{"claims", schemas.Claims, ctoharness.Claims{Claims: []ctoharness.Claim{{Claim: "ParseDuration accepts a leading +", Paths: []string{"duration.go"}}}}},
		{"task check", schemas.TaskCheck, ctoharness.TaskCheck{SchemaVersion: ctoharness.SchemaVersion, CheckedAt: t0, Source: "/repos/a",
			BaseCommit: strings.Repeat("a", 40), TaskDigest: hashA, HiddenTestsDigest: hashB, Reference: "fix.patch", ReferenceDigest: hashA, Repeats: 1,
			Runs: []ctoharness.TaskCheckRun{{RunID: runID, RunDir: "/runs/" + runID, Status: ctoharness.StatusPass, Blockers: []string{},
				Result: []ctoharness.GradedTest{{ID: "TestX", Outcome: "pass", OK: true}}, Baseline: []ctoharness.GradedTest{{ID: "TestX", Outcome: "fail", OK: true}}}},
			Valid: true, Problems: []string{}}},
		{"blocked at gate", schemas.Report, gateBlockedReport()},
		{"fake failed", schemas.Report, fakeFailedReport()},
		{"fault injected", schemas.Report, func() ctoharness.Report {
			r := passReport()
			r.Status, r.Outcome, r.Qualifies, r.FaultInjection = ctoharness.StatusBlocked, ctoharness.OutcomeInfraFailed, false, "proofs/fixture-clean-end.json"
			r.Blockers = []ctoharness.Blocker{{Code: ctoharness.BlockArtifactWriteFailed, Step: ctoharness.StepCleanEnd, Message: "injected fault (failure fixture)"}}
			return r
		}()},
		{"run_started", schemas.Event, ctoharness.Event{Seq: 1, Time: t0, RunID: runID, Type: ctoharness.EvRunStarted, Data: json.RawMessage(`{"stage":3,"backend":"case"}`), Prev: hashA}},
		{"case event", schemas.Event, ctoharness.Event{Seq: 9, Time: t1.In(time.FixedZone("CET", 3600)), RunID: runID, Type: ctoharness.EvCaseFileChanged, Data: json.RawMessage(`{}`), Prev: hashB}},
		{"stat", schemas.Trace, ctoharness.TraceEntry{Seq: 1, RunID: runID, Op: ctoharness.TraceStat, Path: "/home/dev/src/owned-tool", Step: ctoharness.StepClassify}},
		{"exec", schemas.Trace, ctoharness.TraceEntry{Seq: 2, RunID: runID, Op: ctoharness.TraceExec, Path: "/home/dev/src/owned-tool", Argv: []string{"git", "rev-parse", "HEAD"}, Step: ctoharness.StepSourceProof}},
		{"before", schemas.SourceProof, sourceProof()},
		{"detached dirty after", schemas.SourceProof, func() ctoharness.SourceProof {
			p := sourceProof()
			p.Kind, p.Deep, p.StatusClean = "after", false, false
			p.Head = ctoharness.HeadState{Commit: commitB, Tree: treeB}
			p.Status = []ctoharness.StatusEntry{{Path: "README.md", Staging: " ", Worktree: "M"}}
			p.Manifest = []ctoharness.ManifestEntry{}
			return p
		}()},
		{"unchanged", schemas.NonMutation, ctoharness.NonMutationProof{SchemaVersion: ctoharness.SchemaVersion, RunID: runID, BeforeDigest: hashA, AfterDigest: hashA,
			HeadEqual: true, RefsEqual: true, StatusEqual: true, ManifestEqual: true, Differences: []ctoharness.Difference{}}},
		{"mutated", schemas.NonMutation, mutatedProof},
		{"clean start", schemas.FixtureProof, ctoharness.FixtureProof{SchemaVersion: ctoharness.SchemaVersion, RunID: runID, Kind: "clean_start",
			FixturePath: "/var/tmp/cto-harness/work/" + runID + "/fixture", Commit: commitB, Tree: treeA, ExpectedTree: treeA,
			TreeMatches: true, Clean: true, Status: []ctoharness.StatusEntry{}, Problems: []string{}, SymlinksOutside: []string{},
			GitChanges: []ctoharness.GitChange{}, Ignored: []ctoharness.Leftover{}, TakenAt: t0}},
		{"dirty end", schemas.FixtureProof, ctoharness.FixtureProof{SchemaVersion: ctoharness.SchemaVersion, RunID: runID, Kind: "clean_end",
			FixturePath: "/var/tmp/cto-harness/work/" + runID + "/fixture", Commit: commitB, Tree: treeB, ExpectedTree: "",
			Status: []ctoharness.StatusEntry{{Path: "tmp.log", Staging: "?", Worktree: "?"}}, Problems: []string{"untracked file tmp.log"},
			SymlinksOutside: []string{"docs/escape"},
			GitChanges: []ctoharness.GitChange{{Path: "config", Change: ctoharness.GitChangeChanged, Type: ctoharness.EntryFile, Unsafe: true},
				{Path: "index", Change: ctoharness.GitChangeChanged, Type: ctoharness.EntryFile}}, GitChangesTotal: 2,
			Ignored: []ctoharness.Leftover{{Path: "build/out.bin", Type: ctoharness.EntryFile, Size: 3, SHA256: strings.Repeat("a", 64)}}, IgnoredTotal: 1,
			TakenAt: t1}},
		{"full spec", schemas.TaskSpec, spec},
		{"contract", schemas.TaskContract, task.NewContract(spec, runID, "/var/tmp/cto-harness/work/"+runID+"/fixture")},
		{"full config", schemas.Config, config.Config{OwnedSources: []string{"/home/dev/src/owned-tool"}, TargetRoots: []string{"/srv/targets"},
			ExternalRoots: []string{"/opt/vendor"}, StageRecordMaxAge: "36h30m", CaseCommand: []string{"/usr/local/bin/case", "run"},
			Signing: config.Signing{KeyFile: "/etc/cto-harness/signing.key", TrustedKeys: []string{"/etc/cto-harness/signing.pub"}}}},
		{"empty config", schemas.Config, config.Config{OwnedSources: []string{}, TargetRoots: []string{}}},
		{"record", schemas.StageRecord, rec},
		{"allowed", schemas.NetworkRecord, ctoharness.NetworkRecord{Seq: 1, Time: t0, Command: "case", Via: "direct", Listener: "127.77.0.2:443",
			Host: "api.example.com", Port: 443, Resolved: "93.184.216.34:443", Decision: "allowed", Rule: "api.example.com:443",
			RuleSource: "flag", TLS: true, SNI: "api.example.com", BytesUp: 517, BytesDown: 4096, DurationMs: 120}},
		{"denied", schemas.NetworkRecord, ctoharness.NetworkRecord{Seq: 2, Time: t1, Command: "verification", Via: "connect", Listener: "127.0.0.1:3128",
			Host: "evil.example.com", Port: 443, Decision: "denied", Reason: "no allowlist entry for evil.example.com:443", Limit: "connections"}},
		{"network config", schemas.Config, config.Config{OwnedSources: []string{}, TargetRoots: []string{},
			Network: &config.NetworkAllow{CaseAllow: []string{"api.example.com:443", "*.example.org:443"}, VerifyAllow: []string{"127.0.0.1:3000"}}}},
		{"network spec", schemas.TaskSpec, func() task.Spec {
			s := spec
			s.Network = &task.NetworkAllow{VerifyAllow: []string{"proxy.golang.org:443"}}
			return s
		}()},
		{"network report", schemas.Report, func() ctoharness.Report {
			r := passReport()
			r.Network = &ctoharness.NetworkSummary{Policy: ctoharness.NetworkPolicy{Case: []ctoharness.NetworkRule{{Endpoint: "api.example.com:443", Source: "flag"}},
				Verification: []ctoharness.NetworkRule{}, Setup: []ctoharness.NetworkRule{}}, LogPath: "network.jsonl", Attempts: 2, Allowed: 1, Denied: 1,
				DeniedLog: []ctoharness.NetworkDenied{{Seq: 2, Command: "case", Host: "evil.example.com", Port: 443, Reason: "no allowlist entry"}},
				Limits:    ctoharness.NetworkLimits{MaxConcurrent: 32, MaxBytes: 1 << 30, Exceeded: []string{}}, Errors: []string{}}
			return r
		}()},
		{"stage3 ok", schemas.StageResult, map[string]any{
			"ok": true, "checked": []string{"pass run", "failure matrix"}, "errors": []string{},
			"pass_artifact_path":             "/var/tmp/cto-harness/runs/" + runID,
			"failure_artifact_paths":         map[string]string{"DISALLOWED_CHANGE": "/var/tmp/cto-harness/runs/run-b"},
			"source_non_mutation_proof_path": "/var/tmp/cto-harness/runs/" + runID + "/proofs/source-non-mutation.json",
			"health":                         map[string]any{"landlock_abi": 4}, "stage": 3, "record_path": "/var/tmp/cto-harness/records/stage-3.json",
			"signed": true, "key_id": "0123456789abcdef", "signature_ok": true,
		}},
		{"run predicate", schemas.RunPredicate, attest.RunPredicate{RunID: runID, Stage: 3, Status: ctoharness.StatusPass, Blockers: []string{},
			Nonce: "00112233445566778899aabbccddeeff", Commits: ctoharness.Commits{SourceHead: commitA, SourceTree: treeA, BaselineCommit: commitB,
				BaselineTree: treeA, ResultCommit: commitB, ResultTree: treeB},
			Gate:    attest.GateValues{AllowCase: "1", CaseStage: "3", PreviousRecord: &attest.PreviousStage{Stage: 2, RunID: runID, RecordDigest: hashA}},
			Sandbox: attest.SandboxStrength{Enforced: true, Mechanisms: []string{"landlock"}, LandlockABI: 7}, Qualifies: true,
			Harness:        attest.HarnessIdentity{Version: ctoharness.Version, SchemaVersion: ctoharness.SchemaVersion, BinaryBuildID: "MH_73Bq1zBxpQ7yiYkNC/6lq0R7DEEuQvqjV2_dEa/-wMRBDI4F6Tzh_bqzfXj/_egfXpFo7F1zlTqFqcx_"},
			FinalEventHash: hashA, StartedAt: t0, FinishedAt: t1, SignedAt: t1}},
		{"stage record predicate", schemas.StageRecordPredicate, attest.StageRecordPredicate{Stage: 2, RunID: runID, ReportSHA256: hashA,
			RecordDigest: hashA, ValidatedAt: t1, HarnessVersion: ctoharness.Version}},
		{"stage3 failed minimal", schemas.StageResult, map[string]any{
			"ok": false, "checked": []string{}, "errors": []string{"no pass run"}, "pass_artifact_path": "",
			"failure_artifact_paths": map[string]string{}, "source_non_mutation_proof_path": "", "signed": false,
		}},
		{"dry run", schemas.DryRun, map[string]any{
			"status": "dry_run", "stage": 3, "blockers": []any{}, "steps": []string{"gate check"}, "source": "/src", "source_clean": true,
			"copy_target": "/runs/x/fixture", "task_contract": map[string]any{}, "commands": []any{}, "verification": map[string]any{},
			"profile": profile.All()[0].Record(), "unsandboxed": false, "allow_dangerous": false, "warnings": []string{},
			"toolchains_found": []any{map[string]any{"name": "rust", "paths": []string{"/home/u/.cargo"}, "path": []string{"/home/u/.cargo/bin"}, "env": map[string]string{"CARGO_HOME": "/home/u/.cargo"}}},
		}},
		{"case started", schemas.CaseEvent, map[string]any{"type": "case.started", "scenario": "pass", "run_id": runID}},
		{"case file changed", schemas.CaseEvent, map[string]any{"type": "case.file_changed", "path": "docs/a.md"}},
		{"case command", schemas.CaseEvent, map[string]any{"type": "case.command", "command": "go test ./..."}},
		{"case log", schemas.CaseEvent, map[string]any{"type": "case.log", "message": "hello", "extra": 1}},
		{"case finished", schemas.CaseEvent, map[string]any{"type": "case.finished", "status": "ok"}},
	}
}

func compile(t *testing.T) *schemas.Set {
	t.Helper()
	s, err := schemas.Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCompileAndSources(t *testing.T) {
	s1, s2 := compile(t), compile(t)
	if s1 == s2 {
		t.Fatal("Compile returned a shared Set")
	}
	for _, k := range schemas.Kinds() {
		src, err := schemas.Source(k)
		if err != nil {
			t.Fatalf("Source(%s): %v", k, err)
		}
		var head struct {
			Schema string `json:"$schema"`
			ID     string `json:"$id"`
		}
		if err := json.Unmarshal(src, &head); err != nil {
			t.Fatalf("%s: %v", k.FileName(), err)
		}
		if head.ID != "https://cto-harness.invalid/schemas/"+string(k)+".schema.json" || head.ID != k.ID() {
			t.Errorf("%s: $id %q", k.FileName(), head.ID)
		}
		if head.Schema != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema %q", k.FileName(), head.Schema)
		}
	}
	if _, err := schemas.Source("nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Source(unknown) = %v", err)
	}
	if err := s1.Validate("nope", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), `unknown schema kind "nope"`) {
		t.Errorf("Validate(unknown) = %v", err)
	}
	if err := s1.Validator("nope")([]byte(`{}`)); err == nil {
		t.Error("Validator(unknown) accepted")
	}
	// Every schema file is a kind, and every kind has its file.
	files, err := filepath.Glob("*.schema.json")
	if err != nil || len(files) != len(schemas.Kinds()) {
		t.Errorf("%d schema files %v, Kinds() = %v", len(files), files, schemas.Kinds())
	}
}

func TestValidInstances(t *testing.T) {
	s := compile(t)
	seen := map[schemas.Kind]bool{}
	for _, in := range instances() {
		t.Run(string(in.kind)+"/"+in.name, func(t *testing.T) {
			seen[in.kind] = true
			b := mustJSON(t, in.v)
			if err := s.Validate(in.kind, b); err != nil {
				t.Fatalf("valid instance rejected: %v\n%s", err, b)
			}
			// A pretty-printed, newline-terminated document is the same value.
			var buf bytes.Buffer
			if err := json.Indent(&buf, b, "", "  "); err != nil {
				t.Fatal(err)
			}
			buf.WriteString("\n")
			if err := s.Validator(in.kind)(buf.Bytes()); err != nil {
				t.Fatalf("indented instance rejected: %v", err)
			}
		})
	}
	for _, k := range schemas.Kinds() {
		if !seen[k] {
			t.Errorf("no valid instance for %s", k)
		}
	}
}

// The packages that load user files accept the schema validator as is.
func TestLoadersUseValidator(t *testing.T) {
	s := compile(t)
	spec, err := task.Parse([]byte(`{"task":"fix the typo","allowed_paths":["docs/*.md"],"verification":{"command":"make check","timeout_seconds":60}}`),
		"spec.json", s.Validator(schemas.TaskSpec))
	if err != nil {
		t.Fatalf("task.Parse: %v", err)
	}
	if spec.CaseTimeoutSeconds != task.DefaultCaseTimeoutSeconds {
		t.Errorf("case timeout default not applied: %d", spec.CaseTimeoutSeconds)
	}
	if _, err := task.Parse([]byte(`{"task":"x","allowed_paths":["../up"],"verification":{"command":"true","timeout_seconds":1}}`),
		"spec.json", s.Validator(schemas.TaskSpec)); err == nil || !strings.Contains(err.Error(), "/allowed_paths/0") {
		t.Errorf("task.Parse accepted an escaping path: %v", err)
	}
	if _, err := config.Parse([]byte(`{"owned_sources":["/src/a"],"target_repository_roots":[]}`), "cfg.json", s.Validator(schemas.Config)); err != nil {
		t.Errorf("config.Parse: %v", err)
	}
	if _, err := config.Parse([]byte(`{"owned_sources":["src/a"],"target_repository_roots":[]}`), "cfg.json", s.Validator(schemas.Config)); err == nil {
		t.Error("config.Parse accepted a relative owned source")
	}
}

// --- invalid instances ---

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func splitPtr(ptr string) []string {
	if ptr == "" {
		return nil
	}
	return strings.Split(ptr[1:], "/")
}

// parentOf navigates to the container of ptr's last segment.
func parentOf(t *testing.T, root any, ptr string) (any, string) {
	t.Helper()
	segs := splitPtr(ptr)
	if len(segs) == 0 {
		t.Fatalf("no parent for the root")
	}
	cur := root
	for _, s := range segs[:len(segs)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[s]
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i >= len(c) {
				t.Fatalf("bad index %q in %s", s, ptr)
			}
			cur = c[i]
		default:
			t.Fatalf("cannot navigate %s", ptr)
		}
	}
	return cur, segs[len(segs)-1]
}

func setPtr(t *testing.T, root any, ptr string, v any) {
	t.Helper()
	p, last := parentOf(t, root, ptr)
	switch c := p.(type) {
	case map[string]any:
		c[last] = v
	case []any:
		i, _ := strconv.Atoi(last)
		c[i] = v
	default:
		t.Fatalf("cannot set %s", ptr)
	}
}

func delPtr(t *testing.T, root any, ptr string) {
	t.Helper()
	p, last := parentOf(t, root, ptr)
	m, ok := p.(map[string]any)
	if !ok {
		t.Fatalf("cannot delete %s", ptr)
	}
	if _, ok := m[last]; !ok {
		t.Fatalf("nothing to delete at %s", ptr)
	}
	delete(m, last)
}

func getPtr(root any, ptr string) (any, bool) {
	cur := root
	for _, s := range splitPtr(ptr) {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[s]; !ok {
			return nil, false
		}
	}
	return cur, true
}

type edit func(t *testing.T, root any)

func set(ptr string, v any) edit { return func(t *testing.T, r any) { setPtr(t, r, ptr, v) } }
func del(ptr string) edit        { return func(t *testing.T, r any) { delPtr(t, r, ptr) } }

func edited(t *testing.T, v any, edits ...edit) []byte {
	t.Helper()
	root := decodeAny(t, mustJSON(t, v))
	for _, e := range edits {
		e(t, root)
	}
	return mustJSON(t, root)
}

// expectInvalid checks that data fails as kind with an error naming the kind
// and, unless wantPtr is "-", the JSON pointer wantPtr.
func expectInvalid(t *testing.T, s *schemas.Set, kind schemas.Kind, data []byte, wantPtr, wantMsg string) {
	t.Helper()
	err := s.Validate(kind, data)
	if err == nil {
		t.Fatalf("invalid %s accepted:\n%s", kind, data)
	}
	if !strings.Contains(err.Error(), string(kind)) {
		t.Errorf("error does not name the kind %s: %v", kind, err)
	}
	ve, ok := err.(*schemas.ValidationError)
	if !ok {
		t.Fatalf("error is %T, want *schemas.ValidationError: %v", err, err)
	}
	if ve.Kind != kind {
		t.Errorf("ValidationError.Kind = %s, want %s", ve.Kind, kind)
	}
	if wantPtr != "-" && !slices.Contains(ve.Pointers(), wantPtr) {
		t.Errorf("error pointers %q do not include %q: %v", ve.Pointers(), wantPtr, err)
	}
	if wantMsg != "" && !strings.Contains(err.Error(), wantMsg) {
		t.Errorf("error does not mention %q: %v", wantMsg, err)
	}
}

func TestInvalidInstances(t *testing.T) {
	s := compile(t)
	spec := task.Spec{Task: "t", AllowedPaths: []string{"src/**"}, Verification: task.Verification{Command: "make test", TimeoutSeconds: 60}}
	contract := task.NewContract(spec, runID, "/w/fixture")
	cfg := config.Config{OwnedSources: []string{"/a"}, TargetRoots: []string{}}
	var rec gates.Record
	var event ctoharness.Event
	var trace ctoharness.TraceEntry
	var result, fixture, nonMut any
	for _, in := range instances() {
		switch in.name {
		case "record":
			rec = in.v.(gates.Record)
		case "run_started":
			event = in.v.(ctoharness.Event)
		case "exec":
			trace = in.v.(ctoharness.TraceEntry)
		case "stage3 ok":
			result = in.v
		case "clean start":
			fixture = in.v
		case "unchanged":
			nonMut = in.v
		}
	}
	rep := passReport()
	blocked := gateBlockedReport()

	cases := []struct {
		name    string
		kind    schemas.Kind
		data    []byte
		ptr     string // "-" to skip the pointer check
		message string
	}{
		// unknown fields
		{"report unknown root field", schemas.Report, edited(t, rep, set("/extra", 1)), "", "extra"},
		{"report unknown nested field", schemas.Report, edited(t, rep, set("/commits/source_branch", "main")), "/commits", "source_branch"},
		{"report unknown field in array item", schemas.Report, edited(t, blocked, set("/blockers/0/hint", "x")), "/blockers/0", "hint"},
		{"event unknown field", schemas.Event, edited(t, event, set("/hash", hashA)), "", "hash"},
		{"config unknown field", schemas.Config, edited(t, cfg, set("/owned_source", []string{})), "", "owned_source"},
		{"stage result unknown field", schemas.StageResult, edited(t, result, set("/warnings", []string{})), "", "warnings"},

		// wrong enums
		{"report status", schemas.Report, edited(t, rep, set("/status", "ok")), "/status", ""},
		{"report backend", schemas.Report, edited(t, rep, set("/backend", "")), "/backend", ""},
		{"report lane", schemas.Report, edited(t, rep, set("/case_lane", "mock")), "/case_lane", ""},
		{"report blocker code", schemas.Report, edited(t, blocked, set("/blockers/0/code", "GATE_CLOSED")), "/blockers/0/code", ""},
		{"report blocker step", schemas.Report, edited(t, blocked, set("/blockers/0/step", "preflight")), "/blockers/0/step", ""},
		{"report empty classification", schemas.Report, edited(t, rep, set("/tests/classification", "")), "/tests/classification", ""},
		{"report change kind", schemas.Report, edited(t, rep, set("/changed_files/0/change", "renamed")), "/changed_files/0/change", ""},
		{"event type", schemas.Event, edited(t, event, set("/type", "case.exploded")), "/type", ""},
		{"trace op", schemas.Trace, edited(t, trace, set("/op", "chmod")), "/op", ""},
		{"source proof kind", schemas.SourceProof, edited(t, sourceProof(), set("/kind", "during")), "/kind", ""},
		{"manifest entry type", schemas.SourceProof, edited(t, sourceProof(), set("/manifest/0/type", "directory")), "/manifest/0/type", ""},
		{"fixture proof kind", schemas.FixtureProof, edited(t, fixture, set("/kind", "before")), "/kind", ""},
		{"contract event type", schemas.TaskContract, edited(t, contract, set("/evidence_expectations/allowed_event_types/0", "run_started")), "/evidence_expectations/allowed_event_types/0", ""},

		// bad digests and hashes
		{"report final event hash uppercase", schemas.Report, edited(t, rep, set("/freshness/final_event_hash", strings.ToUpper(hashA))), "/freshness/final_event_hash", ""},
		{"report artifact digest short", schemas.Report, edited(t, rep, set("/artifact_digests/trace.jsonl", hashA[:63])), "/artifact_digests/trace.jsonl", ""},
		{"report commit 39 chars", schemas.Report, edited(t, rep, set("/commits/source_head", commitA[:39])), "/commits/source_head", ""},
		{"event prev empty", schemas.Event, edited(t, event, set("/prev", "")), "/prev", ""},
		{"source proof refs digest", schemas.SourceProof, edited(t, sourceProof(), set("/refs_digest", "sha256:"+hashA)), "/refs_digest", ""},
		{"source proof empty head", schemas.SourceProof, edited(t, sourceProof(), set("/head/commit", "")), "/head/commit", ""},
		{"manifest entry empty sha256", schemas.SourceProof, edited(t, sourceProof(), set("/manifest/1/sha256", "")), "/manifest/1/sha256", ""},
		{"non-mutation before digest", schemas.NonMutation, edited(t, nonMut, set("/before_digest", "")), "/before_digest", ""},
		{"fixture tree not hex", schemas.FixtureProof, edited(t, fixture, set("/tree", strings.Repeat("g", 40))), "/tree", ""},
		{"record digest", schemas.StageRecord, edited(t, rec, set("/record_digest", hashA+"0")), "/record_digest", ""},
		{"record report digest", schemas.StageRecord, edited(t, rec, set("/report_sha256", "")), "/report_sha256", ""},

		// missing required
		{"report missing run_id", schemas.Report, edited(t, rep, del("/run_id")), "", "run_id"},
		{"report missing classification", schemas.Report, edited(t, rep, del("/tests/classification")), "/tests", "classification"},
		{"trace exec without argv", schemas.Trace, edited(t, trace, del("/argv")), "", "argv"},
		{"spec missing verification", schemas.TaskSpec, edited(t, spec, del("/verification")), "", "verification"},
		{"config missing target roots", schemas.Config, edited(t, cfg, del("/target_repository_roots")), "", "target_repository_roots"},
		{"stage result missing ok", schemas.StageResult, edited(t, result, del("/ok")), "", "ok"},

		// nulls where the writers must emit [] or {}
		{"report null blockers", schemas.Report, edited(t, blocked, set("/blockers", nil)), "/blockers", ""},
		{"report null allowed paths", schemas.Report, edited(t, blocked, set("/allowed_paths", nil)), "/allowed_paths", ""},
		{"report null policy roots", schemas.Report, edited(t, blocked, set("/policy/external_roots", nil)), "/policy/external_roots", ""},
		{"report null digests", schemas.Report, edited(t, blocked, set("/artifact_digests", nil)), "/artifact_digests", ""},
		{"event null data", schemas.Event, edited(t, event, set("/data", nil)), "/data", ""},
		{"record null checked", schemas.StageRecord, edited(t, rec, set("/checked", nil)), "/checked", ""},

		// types, ranges, formats
		{"report stage 0", schemas.Report, edited(t, rep, set("/stage", 0)), "/stage", ""},
		{"report stage 7", schemas.Report, edited(t, rep, set("/stage", 7)), "/stage", ""},
		{"report stage fractional", schemas.Report, edited(t, rep, set("/stage", 2.5)), "/stage", ""},
		{"report exit code string", schemas.Report, edited(t, rep, set("/case/exit_code", "0")), "/case/exit_code", ""},
		{"report counts not object", schemas.Report, edited(t, rep, set("/tests/counts", 3)), "/tests/counts", ""},
		{"report bad run id", schemas.Report, edited(t, rep, set("/run_id", "../etc")), "/run_id", ""},
		{"report bad schema version", schemas.Report, edited(t, rep, set("/schema_version", "1.0")), "/schema_version", ""},
		{"report relative fixture", schemas.Report, edited(t, rep, set("/fixture_path", "fixture")), "/fixture_path", ""},
		{"report time not RFC 3339", schemas.Report, edited(t, rep, set("/freshness/started_at", "2025-03-01 10:15:00")), "/freshness/started_at", ""},
		{"report zero time", schemas.Report, edited(t, rep, set("/freshness/finished_at", "0001-01-01T00:00:00Z")), "/freshness/finished_at", ""},
		{"event invalid month", schemas.Event, edited(t, event, set("/time", "2025-13-01T00:00:00Z")), "/time", ""},
		{"event seq 0", schemas.Event, edited(t, event, set("/seq", 0)), "/seq", ""},
		{"manifest negative inode", schemas.SourceProof, edited(t, sourceProof(), set("/manifest/0/inode", -1)), "/manifest/0/inode", ""},
		{"spec no allowed paths", schemas.TaskSpec, edited(t, spec, set("/allowed_paths", []string{})), "/allowed_paths", ""},
		{"spec absolute allowed path", schemas.TaskSpec, edited(t, spec, set("/allowed_paths", []string{"/etc/**"})), "/allowed_paths/0", ""},
		{"spec dotdot allowed path", schemas.TaskSpec, edited(t, spec, set("/allowed_paths", []string{"src/../../x"})), "/allowed_paths/0", ""},
		{"spec empty task", schemas.TaskSpec, edited(t, spec, set("/task", "")), "/task", ""},
		{"spec blank command", schemas.TaskSpec, edited(t, spec, set("/verification/command", "  ")), "/verification/command", ""},
		{"spec timeout 0", schemas.TaskSpec, edited(t, spec, set("/verification/timeout_seconds", 0)), "/verification/timeout_seconds", ""},
		{"spec timeout too long", schemas.TaskSpec, edited(t, spec, set("/case_timeout_seconds", 86401)), "/case_timeout_seconds", ""},
		{"contract relative fixture", schemas.TaskContract, edited(t, contract, set("/fixture_path", "fixture")), "/fixture_path", ""},
		{"config relative owned source", schemas.Config, edited(t, cfg, set("/owned_sources", []string{"home/dev"})), "/owned_sources/0", ""},
		{"config empty case command", schemas.Config, edited(t, cfg, set("/case_command", []string{})), "/case_command", ""},
		{"config bad duration", schemas.Config, edited(t, cfg, set("/stage_record_max_age", "1 day")), "/stage_record_max_age", ""},
		{"record stage 9", schemas.StageRecord, edited(t, rec, set("/stage", 9)), "/stage", ""},
		{"stage result stage 0", schemas.StageResult, edited(t, result, set("/stage", 0)), "/stage", ""},
		{"stage result failure path not string", schemas.StageResult, edited(t, result, set("/failure_artifact_paths/TIMEOUT", 1)), "/failure_artifact_paths/TIMEOUT", ""},

		// cross-field rules
		{"report pass with blockers", schemas.Report, edited(t, rep, set("/blockers", []any{map[string]any{"code": "INTERNAL_ERROR", "message": "x", "step": "report"}})), "/blockers", "rule"},
		{"report blocked without blockers", schemas.Report, edited(t, blocked, set("/blockers", []any{})), "/blockers", "rule"},
		{"report qualifies with fault", schemas.Report, edited(t, rep, set("/fault_injection", "trace.jsonl")), "/fault_injection", ""},
		{"report blocked qualifies", schemas.Report, edited(t, blocked, set("/qualifies_as_stage_evidence", true)), "/status", ""},
		{"report relative policy root", schemas.Report, edited(t, rep, set("/policy/target_repository_roots/0", "srv")), "/policy/target_repository_roots/0", ""},
		{"report fake backend started case", schemas.Report, edited(t, fakeFailedReport(), set("/case_process_started", true)), "/case_process_started", ""},
		{"trace argv on non-exec", schemas.Trace, edited(t, trace, set("/op", "read")), "/argv", ""},
		{"source proof clean with status", schemas.SourceProof, edited(t, sourceProof(), set("/status", []any{map[string]any{"path": "a", "staging": "M", "worktree": " "}})), "/status", ""},
		{"non-mutation unmutated with differences", schemas.NonMutation, edited(t, nonMut, set("/difference_count", 1)), "/difference_count", ""},
		{"stage result ok with errors", schemas.StageResult, edited(t, result, set("/errors", []string{"x"})), "/errors", ""},

		// malformed JSON
		{"report truncated", schemas.Report, []byte(`{"schema_version":`), "", "malformed JSON"},
		{"event trailing data", schemas.Event, append(mustJSON(t, event), []byte(` {}`)...), "", "malformed JSON"},
		{"trace two lines", schemas.Trace, append(append(mustJSON(t, trace), '\n'), mustJSON(t, trace)...), "", "malformed JSON"},
		{"config empty", schemas.Config, []byte(""), "", "malformed JSON"},
		{"spec not an object", schemas.TaskSpec, []byte(`["task"]`), "", ""},
		{"record null", schemas.StageRecord, []byte(`null`), "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expectInvalid(t, s, c.kind, c.data, c.ptr, c.message)
		})
	}
}

// TestGenericMutations derives invalid instances from the Go types: every
// object rejects an unknown field, every required field is required, and no
// array field accepts null.
func TestGenericMutations(t *testing.T) {
	s := compile(t)
	first := map[schemas.Kind]any{}
	for _, in := range instances() {
		if _, ok := first[in.kind]; !ok {
			first[in.kind] = in.v
		}
	}
	for k, typ := range goTypes() {
		w := walkKind(t, k, typ, true)
		base := mustJSON(t, first[k])
		t.Run(string(k), func(t *testing.T) {
			for _, sp := range w.structPaths {
				root := decodeAny(t, base)
				obj, ok := getPtr(root, sp)
				if !ok {
					continue // an optional struct absent from the instance
				}
				m := obj.(map[string]any)
				m["zz_unknown"] = true
				expectInvalid(t, s, k, mustJSON(t, root), sp, "zz_unknown")
				delete(m, "zz_unknown")

				st := typ
				for _, seg := range splitPtr(sp) {
					for st.Kind() == reflect.Pointer {
						st = st.Elem()
					}
					for _, f := range jsonFields(t, st) {
						if f.name == seg {
							st = f.typ
						}
					}
				}
				for st.Kind() == reflect.Pointer {
					st = st.Elem()
				}
				for _, f := range jsonFields(t, st) {
					if f.omitempty {
						continue
					}
					root := decodeAny(t, base)
					delPtr(t, root, sp+"/"+f.name)
					expectInvalid(t, s, k, mustJSON(t, root), sp, "'"+f.name+"'")
				}
			}
			for _, ap := range w.arrays {
				if strings.Contains(ap, "[]") || strings.Contains(ap, "{}") {
					continue
				}
				root := decodeAny(t, base)
				if _, ok := getPtr(root, ap[:strings.LastIndex(ap, "/")]); !ok {
					continue // inside an optional struct absent from the instance
				}
				setPtr(t, root, ap, nil)
				expectInvalid(t, s, k, mustJSON(t, root), ap, "")
			}
		})
	}
}

// The task specs shipped with the embedded fixtures are user-style specs.
func TestShippedTaskSpecs(t *testing.T) {
	s := compile(t)
	files, err := filepath.Glob(filepath.Join("..", "fixtures", "repos", "*.task.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("no shipped task specs")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := task.Parse(data, f, s.Validator(schemas.TaskSpec)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func batchSummary() batch.Summary {
	cost, half, one := 0.5, 0.5, 1.0
	tot := batch.Totals{Trials: 2, Finished: 2, Scored: 2, Passes: 1, Attempts: 3, Outcomes: batch.OutcomeCounts{Pass: 1, AgentFailed: 1},
		InputTokens: 10, OutputTokens: 20, CostUSD: &cost, CostBasis: "reported", DurationMs: 1200}
	unknown := tot
	unknown.CostUSD, unknown.CostBasis = nil, "unknown"
	return batch.Summary{SchemaVersion: batch.SummaryVersion, BatchID: "nightly-0123456789ab", Name: "nightly", SpecDigest: hashA, GeneratedAt: t1,
		MaxAttempts: 2, Trials: 2, Finished: 2, Complete: true,
		Cells: []batch.Cell{{Agent: "fake", Task: "note", Totals: tot, PassAtK: []batch.PassAtK{{K: 1, Value: &half}, {K: 2, Value: &one}},
			PassHatK: []batch.PassAtK{{K: 1, Value: &half}, {K: 2, Value: nil}}}},
		Agents: []batch.AgentTotal{{Agent: "fake", Totals: unknown, PassRate: 0.5,
			Failures: []batch.FailureCount{{Outcome: "agent_failed", Code: "TESTS_FAILED", Attempts: 1}, {Outcome: "infra_failed", Attempts: 1}}}},
		TrialList: []batch.TrialRow{{TrialID: "t-0123456789abcdef0123", Source: "/src/a", SourceHead: hashA[:40], Task: "note", Agent: "fake", Repeat: 1,
			AttemptID: "t-0123456789abcdef0123-a1", Outcome: "pass", Final: true, Attempts: 1, RunID: runID, RunDir: "/runs/" + runID, ReportHTML: "../../" + runID + "/report.html", Worker: "local"}},
		Tests:        []batch.TestCell{{Task: "note", Agent: "fake", Test: "fixed", List: batch.ListFailToPass, Graded: 1, Held: 1}},
		SigningKeyID: "k-0123456789abcdef"}
}
