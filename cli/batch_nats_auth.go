package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/batch/natsexec"
)

// natsAuthFlags are how a coordinator or worker proves itself to the NATS
// server (and checks it, with TLS).
type natsAuthFlags struct {
	NkeyFile  string `name:"nats-nkey" type:"existingfile" env:"CTO_HARNESS_NATS_NKEY_FILE" placeholder:"FILE" help:"With --nats: this role's NATS nkey seed file ('cto-harness batch nats-users' makes one per role)."`
	CredsFile string `name:"nats-creds" type:"existingfile" env:"CTO_HARNESS_NATS_CREDS_FILE" placeholder:"FILE" help:"With --nats: a NATS user credentials file (JWT and seed), instead of --nats-nkey."`
	CAFile    string `name:"nats-ca" type:"existingfile" placeholder:"FILE" help:"With --nats: the CA of the server's TLS certificate (use a tls:// URL)."`
	CertFile  string `name:"nats-cert" type:"existingfile" placeholder:"FILE" help:"With --nats: a TLS client certificate (with --nats-cert-key)."`
	KeyFile   string `name:"nats-cert-key" type:"existingfile" placeholder:"FILE" help:"With --nats: the TLS client certificate's key."`
}

func (f natsAuthFlags) auth() natsexec.Auth {
	return natsexec.Auth{CredsFile: f.CredsFile, NkeyFile: f.NkeyFile, CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}
}

// BatchNatsUsersCmd is `cto-harness batch nats-users`.
type BatchNatsUsersCmd struct {
	Out     string   `name:"out" required:"" placeholder:"DIR" help:"Where to write authorization.conf and one nkey seed per role (a new or empty directory)."`
	Workers []string `name:"worker" sep:"none" required:"" placeholder:"[NAME=]FILE" help:"A worker's public signing key (PEM); its seed is NAME.nk (default: worker-<key id>.nk); repeatable."`
}

// Help explains the command.
func (BatchNatsUsersCmd) Help() string {
	return `Makes the NATS identities of a batch deployment: an nkey for the coordinator and one per worker, and
an authorization block for nats-server (include it with 'include ./authorization.conf') that admits these
users only, each with its role's permissions: the coordinator manages the streams, publishes requests and
reads results; a worker pulls and acks requests, publishes results and writes only its own bucket
(cto-harness-runs-<key id>). Give each seed to its role only (--nats-nkey FILE, or
CTO_HARNESS_NATS_NKEY_FILE), as you would a signing key. The NATS identities keep strangers off the server;
the signatures decide what is run and what is counted. See docs/batch.md.`
}

var seedName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Run executes the command.
func (c *BatchNatsUsersCmd) Run(g *Globals, env *Env) error {
	type role struct {
		name string
		user natsexec.ServerUser
	}
	roles := []role{{name: "coordinator", user: natsexec.ServerUser{Comment: "the coordinator", Permissions: natsexec.CoordinatorPermissions()}}}
	seen := map[string]bool{"coordinator": true}
	for _, w := range c.Workers {
		name, file, named := strings.Cut(w, "=")
		if !named {
			name, file = "", w
		}
		pub, err := attest.LoadPublicKey(file)
		if err != nil {
			return usagef("--worker %s: %v", w, err)
		}
		if name == "" {
			name = "worker-" + pub.ID
		}
		if !seedName.MatchString(name) || seen[name] {
			return usagef("--worker %s: the name %q is not a plain file name, or is used twice", w, name)
		}
		seen[name] = true
		perms, err := natsexec.WorkerPermissions(pub.ID)
		if err != nil {
			return usagef("--worker %s: %v", w, err)
		}
		roles = append(roles, role{name: name, user: natsexec.ServerUser{Comment: "worker " + pub.ID + " (" + name + ")", Permissions: perms}})
	}
	if err := os.MkdirAll(c.Out, 0o700); err != nil {
		return fmt.Errorf("make %s: %w", c.Out, err)
	}
	if ents, err := os.ReadDir(c.Out); err != nil || len(ents) > 0 {
		return usagef("--out %s is not an empty directory: nothing was written (old seeds are never overwritten)", c.Out)
	}
	users := make([]natsexec.ServerUser, len(roles))
	for i, r := range roles {
		seed, pub, err := natsexec.NewNkey()
		if err != nil {
			return err
		}
		f := filepath.Join(c.Out, r.name+".nk")
		if err := os.WriteFile(f, append(seed, '\n'), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", f, err)
		}
		r.user.Nkey = pub
		users[i] = r.user
		fmt.Fprintf(env.Stdout, "%s: %s (nkey %s)\n", r.name, f, pub)
	}
	conf := filepath.Join(c.Out, "authorization.conf")
	if err := os.WriteFile(conf, []byte(natsexec.ServerAuthorization(users)), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", conf, err)
	}
	fmt.Fprintf(env.Stdout, "nats-server: include %s in the server's configuration; every other client is refused\n", conf)
	return nil
}
