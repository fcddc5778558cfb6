package natsexec

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Auth is how a coordinator or worker proves itself to the NATS server, and
// how it checks the server. A user and password may instead be given in the
// URL (nats://user:password@host:4222). The server's permissions for that
// identity (Permissions) decide what it may publish; the signatures on
// requests and runs still decide what is run and what counts.
type Auth struct {
	CredsFile string // a user credentials file (JWT and nkey seed)
	NkeyFile  string // an nkey seed file (a line starting "SU")
	CAFile    string // TLS: the CA that signed the server's certificate
	CertFile  string // TLS: a client certificate (with KeyFile)
	KeyFile   string
}

// options are the connection options Auth asks for.
func (a Auth) options() ([]nats.Option, error) {
	var opts []nats.Option
	if a.CredsFile != "" && a.NkeyFile != "" {
		return nil, errors.New("give NATS credentials either as a credentials file or as an nkey seed, not both")
	}
	if a.CredsFile != "" {
		if _, err := os.Stat(a.CredsFile); err != nil {
			return nil, fmt.Errorf("NATS credentials file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(a.CredsFile))
	}
	if a.NkeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(a.NkeyFile)
		if err != nil {
			return nil, fmt.Errorf("NATS nkey seed %s: %w", a.NkeyFile, err)
		}
		opts = append(opts, o)
	}
	if a.CAFile != "" {
		opts = append(opts, nats.RootCAs(a.CAFile))
	}
	if (a.CertFile == "") != (a.KeyFile == "") {
		return nil, errors.New("a NATS TLS client certificate needs both its certificate and its key file")
	}
	if a.CertFile != "" {
		opts = append(opts, nats.ClientCert(a.CertFile, a.KeyFile))
	}
	return opts, nil
}

// Permissions are the subjects one role may publish to and subscribe to, in
// the form of a nats-server user's permissions. Everything else is denied.
type Permissions struct {
	Publish   []string
	Subscribe []string
}

// Inbox prefixes: each role receives replies only on its own inboxes, so
// that no worker can read the replies meant for the coordinator or another
// worker.
const (
	coordinatorInbox = "_INBOX_cto-harness-coordinator"
	workerInboxStem  = "_INBOX_cto-harness-worker-"
)

func workerInbox(keyID string) string { return workerInboxStem + keyID }

var keyIDPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// WorkerBucket is the object store a worker uploads its runs to: one per
// worker key, so that the server can let each worker write its own bucket
// only.
func WorkerBucket(keyID string) string { return RunsBucket + "-" + keyID }

// CoordinatorPermissions is what the coordinator needs: the JetStream API
// (it creates the streams, the workers' consumer and each worker's bucket,
// reads results and downloads runs), publishing requests, acking results.
// It publishes no result.
func CoordinatorPermissions() Permissions {
	return Permissions{
		Publish:   []string{"$JS.API.>", TrialsPrefix + ">", "$JS.ACK." + ResultsStream + ".>"},
		Subscribe: []string{coordinatorInbox + ".>"},
	}
}

// WorkerPermissions is what the worker with key keyID needs and no more:
// pull and ack requests from the workers' consumer, publish results, and
// make, fill and read its own bucket. It cannot publish a request, touch a
// stream's configuration, or write another worker's bucket.
func WorkerPermissions(keyID string) (Permissions, error) {
	if !keyIDPattern.MatchString(keyID) {
		return Permissions{}, fmt.Errorf("worker key id %q: want the 16 hex digits 'cto-harness keygen' prints", keyID)
	}
	obj := "OBJ_" + WorkerBucket(keyID)
	return Permissions{
		Publish: []string{
			"$JS.API.CONSUMER.INFO." + TrialsStream + "." + WorkerConsumer,
			"$JS.API.CONSUMER.MSG.NEXT." + TrialsStream + "." + WorkerConsumer,
			"$JS.ACK." + TrialsStream + "." + WorkerConsumer + ".>",
			ResultsPrefix + ">",
			"$JS.API.STREAM.CREATE." + obj,
			"$JS.API.STREAM.UPDATE." + obj,
			"$JS.API.STREAM.INFO." + obj,
			"$JS.API.STREAM.MSG.GET." + obj,
			"$JS.API.STREAM.PURGE." + obj,
			"$JS.API.DIRECT.GET." + obj,
			"$JS.API.DIRECT.GET." + obj + ".>",
			"$O." + WorkerBucket(keyID) + ".>",
		},
		Subscribe: []string{workerInbox(keyID) + ".>"},
	}, nil
}

// ServerUser is one nats-server user: an nkey (public, "U…") with a role's
// permissions.
type ServerUser struct {
	Nkey        string
	Comment     string
	Permissions Permissions
}

// ServerAuthorization is a nats-server configuration block that admits the
// given users, each with its permissions, and nobody else.
func ServerAuthorization(users []ServerUser) string {
	var b strings.Builder
	b.WriteString("# cto-harness batch users: every other client is refused.\nauthorization {\n  users = [\n")
	for _, u := range users {
		if u.Comment != "" {
			fmt.Fprintf(&b, "    # %s\n", u.Comment)
		}
		fmt.Fprintf(&b, "    {\n      nkey: %q\n      permissions: {\n", u.Nkey)
		fmt.Fprintf(&b, "        publish: { allow: %s }\n", quoteList(u.Permissions.Publish))
		fmt.Fprintf(&b, "        subscribe: { allow: %s }\n", quoteList(u.Permissions.Subscribe))
		b.WriteString("      }\n    }\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

func quoteList(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// NewNkey makes a NATS user nkey: the seed a client connects with (kept
// secret, like a signing key) and the public key the server lists.
func NewNkey() (seed []byte, public string, err error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, "", err
	}
	if seed, err = kp.Seed(); err != nil {
		return nil, "", err
	}
	public, err = kp.PublicKey()
	return seed, public, err
}
