package natsexec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// conn is a connection with the batch's streams and object store in place.
type conn struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	obj jetstream.ObjectStore
}

// dial connects and creates (or binds to) the streams and the bucket. Both
// sides call it; the configurations are identical, so either may be first.
func dial(ctx context.Context, url, name string) (*conn, error) {
	nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c := &conn{nc: nc, js: js}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: TrialsStream, Subjects: []string{TrialsPrefix + ">"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: replicas(ctx, js, TrialsStream)}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("JetStream stream %s at %s (is JetStream enabled on the server?): %w", TrialsStream, url, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: ResultsStream, Subjects: []string{ResultsPrefix + ">"},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, MaxAge: 7 * 24 * time.Hour, Replicas: replicas(ctx, js, ResultsStream)}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("JetStream stream %s: %w", ResultsStream, err)
	}
	if c.obj, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: RunsBucket, Storage: jetstream.FileStorage,
		Description: "cto-harness trial run directories (tar), keyed by attempt id and worker", Replicas: replicas(ctx, js, "OBJ_"+RunsBucket)}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("JetStream object store %s: %w", RunsBucket, err)
	}
	return c, nil
}

// workerConsumer binds to the shared pull consumer, creating it with ackWait
// when it does not exist yet (the coordinator's setting wins: it creates or
// updates it first).
func (c *conn) workerConsumer(ctx context.Context, ackWait time.Duration, create bool) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{Durable: WorkerConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
		MaxDeliver: -1, MaxAckPending: 10000}
	if create {
		return c.js.CreateOrUpdateConsumer(ctx, TrialsStream, cfg)
	}
	cons, err := c.js.Consumer(ctx, TrialsStream, WorkerConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return c.js.CreateConsumer(ctx, TrialsStream, cfg)
	}
	return cons, err
}

func (c *conn) close() { c.nc.Close() }

// replicas is the replica count an existing stream has, so that binding to
// it keeps what an operator set (nats stream edit --replicas 3 on a
// cluster) instead of scaling it back to the server's default of one. A
// stream that does not exist yet (0) gets one replica: the harness builds no
// cluster.
func replicas(ctx context.Context, js jetstream.JetStream, stream string) int {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0
	}
	return s.CachedInfo().Config.Replicas
}
