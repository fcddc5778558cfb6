package natsexec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// conn is a connection with the batch's streams in place; obj is the
// worker's own bucket (a worker's connection only).
type conn struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	obj jetstream.ObjectStore
}

// dial connects with auth; replies come to inbox (the role's own prefix).
func dial(url, name, inbox string, auth Auth) (*conn, error) {
	opts, err := auth.options()
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second), nats.CustomInboxPrefix(inbox))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) {
			return nil, fmt.Errorf("connect to NATS at %s: the server refused this client's credentials (give the nkey seed or credentials file its operator made for this role; see docs/batch.md): %w", url, err)
		}
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &conn{nc: nc, js: js}, nil
}

// maxAckPending is the workers' consumer's bound on requests in hand.
const maxAckPending = 10000

// createStreams makes (or updates) the streams and the workers' consumer:
// the coordinator's part. Workers cannot; they wait for it (bindWorker).
func (c *conn) createStreams(ctx context.Context, ackWait time.Duration) error {
	js := c.js
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: TrialsStream, Subjects: []string{TrialsPrefix + ">"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: replicas(ctx, js, TrialsStream)}); err != nil {
		return fmt.Errorf("JetStream stream %s (is JetStream enabled on the server, and may this client use $JS.API.>?): %w", TrialsStream, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: ResultsStream, Subjects: []string{ResultsPrefix + ">"},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, MaxAge: 7 * 24 * time.Hour, Replicas: replicas(ctx, js, ResultsStream)}); err != nil {
		return fmt.Errorf("JetStream stream %s: %w", ResultsStream, err)
	}
	// MaxAckPending bounds the requests delivered to workers and not yet
	// acknowledged, over every worker at once: it is what the workers'
	// slots hold (each worker holds at most its slots, plus a request it is
	// handing back), never what waits in the queue. 10000 is far above any
	// fleet of workers × slots this is for (a thousand workers of 8 slots),
	// so it never throttles them; a batch of more trials than that still
	// queues them all. It does not follow one batch's trials: the consumer
	// is shared by every batch on the server.
	cfg := jetstream.ConsumerConfig{Durable: WorkerConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
		MaxDeliver: -1, MaxAckPending: maxAckPending}
	if _, err := js.CreateOrUpdateConsumer(ctx, TrialsStream, cfg); err != nil {
		return fmt.Errorf("the workers' consumer: %w", err)
	}
	return nil
}

// bindWorker binds to the workers' consumer, waiting (and saying so once)
// while no coordinator has created it, and makes the worker's own bucket.
func (c *conn) bindWorker(ctx context.Context, keyID string, log func(string)) (jetstream.Consumer, error) {
	var err error
	bucket := WorkerBucket(keyID)
	if c.obj, err = c.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, Storage: jetstream.FileStorage,
		Description: "cto-harness trial run directories (tar) of worker " + keyID + ", keyed by attempt id",
		Replicas:    replicas(ctx, c.js, "OBJ_"+bucket)}); err != nil {
		return nil, fmt.Errorf("JetStream object store %s (may this worker's NATS user use it? see docs/batch.md): %w", bucket, err)
	}
	said := false
	for {
		cons, err := c.js.Consumer(ctx, TrialsStream, WorkerConsumer)
		if err == nil {
			return cons, nil
		}
		if !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("the workers' consumer %s on %s: %w", WorkerConsumer, TrialsStream, err)
		}
		if !said {
			log("no trials stream yet: waiting for a coordinator ('cto-harness batch run SPEC --nats URL') to create it")
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
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
