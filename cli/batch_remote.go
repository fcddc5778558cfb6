package cli

import (
	"time"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/batch"
	"github.com/cto-harness/cto-harness/schemas"
)

type coordinator interface {
	batch.Runner
	Close()
}

func newCoordinator(env *Env, set *schemas.Set, st batch.Store, plan batch.Plan, workers []attest.PublicKey, url string, ackWait time.Duration) (coordinator, error) {
	return nil, usagef("--nats is not available yet")
}

func remoteVerifier(set *schemas.Set, workers []attest.PublicKey) batch.Verifier { return nil }
