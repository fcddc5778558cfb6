// Package e2e runs each supported coding agent as Case through the whole
// pipeline against the scripted model server. Its tests need the pinned
// agents installed (`cto-harness agents install`) and run only when
// CTO_HARNESS_AGENT_TESTS=1 (`make test-agents`); with
// CTO_HARNESS_AGENT_TESTS=require a missing agent fails instead of skipping.
package e2e
