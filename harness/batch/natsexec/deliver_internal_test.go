package natsexec

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cto-harness/cto-harness/harness/batch"
)

// dataMsg is a delivered message of which deliver reads only the data.
type dataMsg struct {
	jetstream.Msg
	data []byte
}

func (m dataMsg) Data() []byte { return m.data }

// A worker's answer to one trial is counted (checking) as it is delivered,
// before its word that it took the next one (running) is: counted the
// other way round, a worker of one slot showed two trials running, and a
// batch more running than its workers have slots.
func TestAnswerCountedBeforeTheNextStart(t *testing.T) {
	var order []string
	co := &Coordinator{o: CoordinatorOptions{Log: io.Discard}, wait: map[string]chan Result{}, ats: map[string]func(batch.AttemptState){}}
	for _, id := range []string{"r1", "r2"} {
		co.wait[id] = make(chan Result, 1)
		co.ats[id] = func(s batch.AttemptState) { order = append(order, fmt.Sprintf("%s:%d", id, s)) }
	}
	send := func(r Result) {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		co.deliver(dataMsg{data: data})
	}
	send(Result{RequestID: "r1", Started: true})
	send(Result{RequestID: "r1", Worker: "w"})
	send(Result{RequestID: "r2", Started: true})
	want := []string{fmt.Sprintf("r1:%d", batch.Running), fmt.Sprintf("r1:%d", batch.Checking), fmt.Sprintf("r2:%d", batch.Running)}
	if !slices.Equal(order, want) {
		t.Fatalf("states told in the order %v, want %v", order, want)
	}
}
