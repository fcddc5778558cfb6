package evidence

import "github.com/cto-harness/cto-harness/harness/egress"

// NetworkLog is network.jsonl: one line per connection attempt through the
// egress forwarder, written whenever a network allowlist is in force.
const NetworkLog = egress.LogName
