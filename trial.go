package ctoharness

// TrialBinding ties a run to the batch trial attempt that asked for it. A
// batch executor (the local one, or a worker answering a coordinator's signed
// request) fills it in before the run starts; the run records it in
// report.json and in the signed predicate, and a result counts only when
// every field equals the request's. Nonce is the request's own nonce, fresh
// per request and distinct from the run's freshness nonce: a run made for one
// request can never answer another, however it is re-uploaded.
type TrialBinding struct {
	BatchID    string `json:"batch_id"`
	SpecDigest string `json:"spec_digest"`
	TrialID    string `json:"trial_id"`
	AttemptID  string `json:"attempt_id"`
	Attempt    int    `json:"attempt"`
	Nonce      string `json:"request_nonce"`
	// TaskDigest is the sha256 of the canonical task spec the run was given,
	// computed by the executor from the spec itself.
	TaskDigest string `json:"task_digest"`
	Source     string `json:"source"`
	SourceHead string `json:"source_head"`
	Agent      string `json:"agent"`
	AgentKind  string `json:"agent_kind"`
	Model      string `json:"model"`
	Repeat     int    `json:"repeat"`
}
