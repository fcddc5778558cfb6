package profile

// Record is a profile as the harness prints it in JSON: snake_case keys and
// durations in whole seconds, like every other JSON the harness writes.
type Record struct {
	Name              Name   `json:"name"`
	MaxCaseCommands   int    `json:"max_case_commands"`
	MaxHeavy          int    `json:"max_heavy_commands"`
	MaxTestRuns       int    `json:"max_test_runs"`
	FlakeReruns       int    `json:"flake_reruns"`
	AllowInstalls     bool   `json:"allow_installs"`
	RunTests          bool   `json:"run_tests"`
	HeavyWeight       int    `json:"heavy_weight"`
	TestBudgetSeconds int64  `json:"test_budget_seconds"`
	Qualifies         bool   `json:"qualifies"`
	Description       string `json:"description"`
}

// Record returns the profile's JSON form.
func (p Policy) Record() Record {
	return Record{Name: p.Name, MaxCaseCommands: p.MaxCaseCommands, MaxHeavy: p.MaxHeavy, MaxTestRuns: p.MaxTestRuns,
		FlakeReruns: p.FlakeReruns, AllowInstalls: p.AllowInstalls, RunTests: p.RunTests, HeavyWeight: p.HeavyWeight,
		TestBudgetSeconds: int64(p.TestBudget.Seconds()), Qualifies: p.Qualifies, Description: p.Description}
}
