package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/tokenvault/tokenvault/transforms"
	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "vault",
		Usage: "tenant create|list|delete|quotas | rotate-master-key | rotate-data-key | hostname add|list|delete | backup --output FILE | restore --input FILE --storage DIR [--address <admin>] | audit verify|key | version",
		Short: "Operates the token vault of a running Caddy",
		Long: `
Operates the token vault through the admin API of a running Caddy, so it
works while the vault holds its storage open.

  caddy vault tenant create --name NAME --type test|production
      creates a tenant with a management application and prints them as
      JSON, with the application's key; the key is shown only this once.
  caddy vault tenant list
  caddy vault tenant delete ID
      destroys the tenant's data and keys.
  caddy vault tenant quotas ID [--tokenize-limit N] [--detokenize-limit N]
      [--cvc-retention DURATION] [--log-retention DURATION]
      [--included-monthly-active-tokens N] [--rate-limit default|exempt]
      changes the quotas given and prints the tenant.
  caddy vault rotate-master-key --new-key '{env.NEW_MASTER_KEY}'
      rewraps every data key under the new master key while serving; set
      master_key to the same placeholder before the next start.
  caddy vault rotate-data-key --tenant ID [--status]
      starts a new data key version for the tenant's new writes and
      re-seals its records in the background; --status shows progress.
  caddy vault hostname add --tenant ID --proxy PROXY_ID HOSTNAME
      registers a whitelabel hostname for a proxy: a vault_proxy site
      serves it, and on-demand TLS with "permission vault" may obtain its
      certificate.
  caddy vault hostname list --tenant ID
  caddy vault hostname delete --tenant ID HOSTNAME
  caddy vault backup --output FILE [--force]
      streams a consistent snapshot of the running vault into FILE
      (created 0600; an existing FILE is replaced only with --force). The
      backup is sealed under the master key: without it, it shows nothing
      but its size. It leaves out CVCs, whose keys are shredded when
      their retention ends: restored card tokens have no CVC.
  caddy vault restore --input FILE --storage DIR
      (--master-key-env NAME | --master-key-file PATH)
      restores a backup, offline, into DIR, which must be empty or new,
      with the master key it was taken with: base64, in the environment
      variable NAME or in the file PATH (never on the command line).
      Start Caddy with storage DIR and the same master key.
  caddy vault restore --input FILE --postgres-env NAME [--postgres-table T]
      (--master-key-env NAME | --master-key-file PATH)
      the same into the PostgreSQL database whose connection string is
      in the environment variable NAME; its table must hold no entries.
      Start the nodes on that database with the same master key.
  caddy vault audit verify --tenant ID [--since SEQ|TIME]
      verifies the tenant's tamper-evident audit chain; --backup FILE
      with the master key verifies a backup offline, and --file PATH an
      exported vault.audit log (see caddy vault audit verify --help).
  caddy vault audit key --tenant ID
      prints the key that verifies the tenant's exported audit lines.
  caddy vault version
      prints Tokenvault's version, the module version Go recorded in this
      binary (what caddy build-info shows), Caddy's version and Go's.

The admin endpoint is found like Caddy's own commands find it: --address,
or the admin address of --config, or the default localhost:2019. restore
and version need no running Caddy: restore writes DIR (or the database)
itself.`,
		CobraFunc: func(cmd *cobra.Command) {
			tenant := &cobra.Command{Use: "tenant", Short: "Creates, lists and deletes tenants"}
			create := &cobra.Command{
				Use:   "create --name NAME --type test|production",
				Short: "Creates a tenant and prints its management key",
				Args:  cobra.NoArgs,
				RunE:  runVault(cmdTenantCreate),
			}
			create.Flags().String("name", "", "Name of the tenant (required)")
			create.Flags().String("type", "test", "Tenant type: test or production")
			list := &cobra.Command{
				Use:   "list",
				Short: "Lists tenants",
				Args:  cobra.NoArgs,
				RunE:  runVault(cmdTenantList),
			}
			del := &cobra.Command{
				Use:   "delete ID",
				Short: "Deletes a tenant with all its data and keys",
				Args:  cobra.ExactArgs(1),
				RunE: func(c *cobra.Command, args []string) error {
					return runVault(func(fl caddycmd.Flags) (int, error) {
						return adminCall(fl, http.MethodDelete, "/vault/tenants/"+args[0], nil)
					})(c, args)
				},
			}
			for _, c := range []*cobra.Command{create, list, del, quotasCommand()} {
				addAdminFlags(c)
				tenant.AddCommand(c)
			}
			cmd.AddCommand(tenant, hostnameCommand(), rotateMasterKeyCommand(), rotateDataKeyCommand(), workerCommand(), backupCommand(), restoreCommand(), versionCommand(), auditCommand())
		},
	})
}

// quotasCommand is "caddy vault tenant quotas ID --flag value...".
func quotasCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "quotas ID [--tokenize-limit N] [--detokenize-limit N] [--cvc-retention D] [--log-retention D] [--included-monthly-active-tokens N] [--rate-limit default|exempt]",
		Short: "Changes a tenant's quotas",
		Args:  cobra.ExactArgs(1),
	}
	c.Flags().Int("tokenize-limit", 0, "Tokens one /tokenize request may create")
	c.Flags().Int("detokenize-limit", 0, "Expressions one /detokenize request may hold")
	c.Flags().Duration("cvc-retention", 0, "How long a card's CVC is kept (e.g. 1h)")
	c.Flags().Duration("log-retention", 0, "How long audit records are kept (e.g. 24h)")
	c.Flags().Int64("included-monthly-active-tokens", 0, "Monthly active tokens included in the plan")
	c.Flags().String("rate-limit", "", "Rate limit profile: default or exempt")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		return runVault(func(fl caddycmd.Flags) (int, error) {
			body := map[string]any{}
			set := cmd.Flags().Changed
			if set("tokenize-limit") {
				body["tokenize_limit"] = fl.Int("tokenize-limit")
			}
			if set("detokenize-limit") {
				body["detokenize_limit"] = fl.Int("detokenize-limit")
			}
			if set("cvc-retention") {
				body["cvc_retention_seconds"] = int64(fl.Duration("cvc-retention").Seconds())
			}
			if set("log-retention") {
				body["log_retention_seconds"] = int64(fl.Duration("log-retention").Seconds())
			}
			if set("included-monthly-active-tokens") {
				v, _ := cmd.Flags().GetInt64("included-monthly-active-tokens")
				body["included_monthly_active_tokens"] = v
			}
			if set("rate-limit") {
				body["rate_limit"] = fl.String("rate-limit")
			}
			if len(body) == 0 {
				return caddy.ExitCodeFailedStartup, fmt.Errorf("name at least one quota to change")
			}
			raw, _ := json.Marshal(body)
			return adminCall(fl, http.MethodPut, "/vault/tenants/"+url.PathEscape(args[0])+"/quotas", raw)
		})(cmd, args)
	}
	return c
}

// rotateMasterKeyCommand is "caddy vault rotate-master-key --new-key P".
func rotateMasterKeyCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "rotate-master-key --new-key PLACEHOLDER",
		Short: "Rewraps every data key under a new master key, online",
		Args:  cobra.NoArgs,
		RunE: runVault(func(fl caddycmd.Flags) (int, error) {
			p := fl.String("new-key")
			if p == "" {
				return caddy.ExitCodeFailedStartup, fmt.Errorf("--new-key is required: a placeholder such as {env.NEW_MASTER_KEY} that the server resolves")
			}
			body, _ := json.Marshal(map[string]string{"master_key": p})
			return adminCall(fl, http.MethodPost, "/vault/master-key", body)
		}),
	}
	c.Flags().String("new-key", "", "Placeholder of the new master key, resolved by the server ({env.NAME} or {file.PATH})")
	addAdminFlags(c)
	return c
}

// rotateDataKeyCommand is "caddy vault rotate-data-key --tenant ID".
func rotateDataKeyCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "rotate-data-key --tenant ID [--status]",
		Short: "Starts a new data key version for a tenant and re-seals its records",
		Args:  cobra.NoArgs,
		RunE: runVault(func(fl caddycmd.Flags) (int, error) {
			uri := "/vault/tenants/" + url.PathEscape(fl.String("tenant")) + "/data-keys"
			if fl.Bool("status") {
				return adminCall(fl, http.MethodGet, uri, nil)
			}
			return adminCall(fl, http.MethodPost, uri, nil)
		}),
	}
	c.Flags().String("tenant", "", "Id of the tenant (required)")
	c.Flags().Bool("status", false, "Only show the data key versions and re-seal progress")
	addAdminFlags(c)
	return c
}

// workerCommand is the transform worker process the vault app starts: it
// runs tenant JavaScript over its stdin and stdout, never by hand.
func workerCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "transform-worker",
		Short:  "Runs tenant code for the vault app (started by it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return transforms.ServeWorker(os.Stdin, os.Stdout)
		},
	}
}

// hostnameCommand is "caddy vault hostname add|list|delete".
func hostnameCommand() *cobra.Command {
	hostname := &cobra.Command{Use: "hostname", Short: "Registers whitelabel hostnames for proxies"}
	add := &cobra.Command{
		Use:   "add --tenant ID --proxy PROXY_ID HOSTNAME",
		Short: "Registers a hostname for a proxy",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runVault(func(fl caddycmd.Flags) (int, error) {
				body, _ := json.Marshal(map[string]string{"hostname": args[0], "proxy_id": fl.String("proxy")})
				return adminCall(fl, http.MethodPost, "/vault/tenants/"+url.PathEscape(fl.String("tenant"))+"/hostnames", body)
			})(c, args)
		},
	}
	add.Flags().String("proxy", "", "Id of the proxy the hostname serves (required)")
	list := &cobra.Command{
		Use:   "list --tenant ID",
		Short: "Lists a tenant's hostnames",
		Args:  cobra.NoArgs,
		RunE: runVault(func(fl caddycmd.Flags) (int, error) {
			return adminCall(fl, http.MethodGet, "/vault/tenants/"+url.PathEscape(fl.String("tenant"))+"/hostnames", nil)
		}),
	}
	del := &cobra.Command{
		Use:   "delete --tenant ID HOSTNAME",
		Short: "Removes a hostname",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runVault(func(fl caddycmd.Flags) (int, error) {
				return adminCall(fl, http.MethodDelete, "/vault/tenants/"+url.PathEscape(fl.String("tenant"))+"/hostnames/"+url.PathEscape(args[0]), nil)
			})(c, args)
		},
	}
	for _, c := range []*cobra.Command{add, list, del} {
		c.Flags().String("tenant", "", "Id of the tenant (required)")
		addAdminFlags(c)
		hostname.AddCommand(c)
	}
	return hostname
}

// addAdminFlags adds the flags that locate the admin endpoint, as Caddy's
// own commands name them.
func addAdminFlags(c *cobra.Command) {
	c.Flags().String("address", "", "The address of the administration API")
	c.Flags().StringP("config", "c", "", "Configuration file whose admin address to use")
	c.Flags().StringP("adapter", "a", "", "Name of config adapter to apply")
}

func cmdTenantCreate(fl caddycmd.Flags) (int, error) {
	name := fl.String("name")
	if name == "" {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--name is required")
	}
	body, _ := json.Marshal(map[string]string{"name": name, "type": fl.String("type")})
	return adminCall(fl, http.MethodPost, "/vault/tenants", body)
}

func cmdTenantList(fl caddycmd.Flags) (int, error) {
	return adminCall(fl, http.MethodGet, "/vault/tenants", nil)
}

// adminCall sends one request to the admin API and prints the JSON answer
// to standard output; a refusal is a *serverProblem, which runVault
// prints.
func adminCall(fl caddycmd.Flags, method, uri string, body []byte) (int, error) {
	addr, err := adminAddress(fl)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	resp, err := adminRequest(addr, method, uri, reader)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if len(bytes.TrimSpace(out)) > 0 {
		var pretty bytes.Buffer
		if json.Indent(&pretty, out, "", "  ") == nil {
			out = append(pretty.Bytes(), '\n')
		}
		os.Stdout.Write(out)
	}
	return caddy.ExitCodeSuccess, nil
}

// adminAddress finds the admin endpoint from the flags addAdminFlags adds.
func adminAddress(fl caddycmd.Flags) (string, error) {
	addr, err := caddycmd.DetermineAdminAPIAddress(fl.String("address"), nil, fl.String("config"), fl.String("adapter"))
	if err != nil {
		return "", fmt.Errorf("finding the admin address: %v", err)
	}
	return addr, nil
}

// backupCommand is "caddy vault backup --output FILE".
func backupCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "backup --output FILE [--force] [--address ADMIN]",
		Short: "Streams a sealed backup of the running vault into a file",
		Args:  cobra.NoArgs,
		RunE:  runVault(cmdBackup),
	}
	c.Flags().StringP("output", "o", "", "File to write the backup to (required)")
	c.Flags().Bool("force", false, "Replace the file if it exists")
	addAdminFlags(c)
	return c
}

// restoreCommand is "caddy vault restore --input FILE --storage DIR".
func restoreCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "restore --input FILE (--storage DIR | --postgres-env NAME) (--master-key-env NAME | --master-key-file PATH)",
		Short: "Restores a backup into a new storage directory or an empty database, offline",
		Args:  cobra.NoArgs,
		RunE:  runVault(cmdRestore),
	}
	c.Flags().StringP("input", "i", "", "Backup file to restore, - for standard input (required)")
	c.Flags().String("storage", "", "Storage directory to restore into; must be empty or missing")
	c.Flags().String("postgres-env", "", "Environment variable holding the connection string of a PostgreSQL database to restore into; it must hold no vault entries")
	c.Flags().String("postgres-table", "", "Table of the vault's entries in that database (default tokenvault_kv)")
	c.Flags().String("master-key-env", "", "Environment variable holding the base64 master key")
	c.Flags().String("master-key-file", "", "File holding the base64 master key")
	return c
}

func cmdBackup(fl caddycmd.Flags) (int, error) {
	path, force := fl.String("output"), fl.Bool("force")
	if path == "" {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--output is required")
	}
	if _, err := os.Lstat(path); err == nil && !force {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("%s exists; use --force to replace it", path)
	}
	addr, err := adminAddress(fl)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	resp, err := adminRequest(addr, http.MethodGet, "/vault/backup", nil)
	if err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("backup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("backup: the admin API answered %s", resp.Status)
	}
	out, err := createBackupFile(path, force)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	sink := &backupSink{file: out.f, tty: isTerminal(os.Stderr)}
	_, err = io.Copy(sink, resp.Body)
	if sink.shown {
		fmt.Fprintln(os.Stderr)
	}
	if err == nil && !sink.meter.Complete() {
		err = fmt.Errorf("the stream ended before its last frame (the server's log says why)")
	}
	if err == nil {
		err = out.commit()
	}
	if err != nil {
		out.abort()
		return caddy.ExitCodeFailedStartup, fmt.Errorf("backup: %v; no backup was written", err)
	}
	fmt.Fprintf(os.Stderr, "backup written to %s: %s, %s records\n", path, humanBytes(sink.meter.Bytes()), groupDigits(sink.meter.Records()))
	return caddy.ExitCodeSuccess, nil
}

// backupSink checks the stream as it passes, writes it to the file and,
// on a terminal, shows how far it has got.
type backupSink struct {
	file  *os.File
	meter vaultstore.BackupMeter
	tty   bool
	shown bool
	last  time.Time
}

func (b *backupSink) Write(p []byte) (int, error) {
	if _, err := b.meter.Write(p); err != nil {
		return 0, err
	}
	n, err := b.file.Write(p)
	if err != nil {
		return n, err
	}
	if b.tty && (time.Since(b.last) > 100*time.Millisecond || b.meter.Complete()) {
		b.last, b.shown = time.Now(), true
		fmt.Fprintf(os.Stderr, "\r%s, %s records ", humanBytes(b.meter.Bytes()), groupDigits(b.meter.Records()))
	}
	return n, nil
}

// backupFile is the file a backup is written to: the named file itself,
// created exclusively, or with --force a temporary file beside it that
// replaces it once complete, so a failed backup leaves the old one.
type backupFile struct {
	f          *os.File
	path, temp string
}

func createBackupFile(path string, force bool) (*backupFile, error) {
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("creating the backup file: %v", err)
		}
		return &backupFile{f: f, path: path}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("creating the backup file: %v", err)
	}
	return &backupFile{f: f, path: path, temp: f.Name()}, nil
}

// commit makes the backup durable under its name.
func (b *backupFile) commit() error {
	if err := b.f.Sync(); err != nil {
		return err
	}
	if err := b.f.Close(); err != nil {
		return err
	}
	if b.temp != "" {
		if err := os.Rename(b.temp, b.path); err != nil {
			return err
		}
	}
	d, err := os.Open(filepath.Dir(b.path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// abort removes what was written.
func (b *backupFile) abort() {
	b.f.Close()
	if b.temp != "" {
		os.Remove(b.temp)
	} else {
		os.Remove(b.path)
	}
}

func cmdRestore(fl caddycmd.Flags) (int, error) {
	input, dir, pgEnv := fl.String("input"), fl.String("storage"), fl.String("postgres-env")
	if input == "" || (dir == "") == (pgEnv == "") {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--input and one of --storage or --postgres-env are required")
	}
	var database *postgres.Options
	if pgEnv != "" {
		dsn := os.Getenv(pgEnv)
		if dsn == "" {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("--postgres-env: the environment variable %s is empty or unset", pgEnv)
		}
		database = &postgres.Options{DSN: dsn, Table: fl.String("postgres-table")}
		dir = "the database"
	}
	key, err := restoreMasterKey(fl.String("master-key-env"), fl.String("master-key-file"))
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	defer clear(key)
	in := os.Stdin
	if input != "-" {
		if in, err = os.Open(input); err != nil {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("restore: %v", err)
		}
		defer in.Close()
	}
	opts := vaultstore.RestoreOptions{Dir: dir, Postgres: database, MasterKey: key, Logger: caddy.Log().Named("vault.restore")}
	var shown bool
	if isTerminal(os.Stderr) {
		var last time.Time
		opts.Progress = func(bytes, records int64) {
			if time.Since(last) > 100*time.Millisecond {
				last, shown = time.Now(), true
				fmt.Fprintf(os.Stderr, "\r%s, %s records ", humanBytes(bytes), groupDigits(records))
			}
		}
	}
	stats, err := vaultstore.Restore(in, opts)
	if shown {
		fmt.Fprintln(os.Stderr)
	}
	if errors.Is(err, vaultstore.ErrBackupKeyMismatch) {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("restore refused: %w; nothing was written", err)
	}
	if err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("restore failed: %w", err)
	}
	fmt.Fprintf(os.Stderr, "restored %s records from a backup of %s taken %s into %s", groupDigits(stats.Records), humanBytes(stats.Bytes), stats.CreatedAt.Format(time.RFC3339), dir)
	if stats.Expired > 0 {
		fmt.Fprintf(os.Stderr, "; %s had expired and were left out", groupDigits(stats.Expired))
	}
	fmt.Fprintln(os.Stderr, "\nstart the vault on this storage with the same master key; restored card tokens have no CVC")
	return caddy.ExitCodeSuccess, nil
}

// restoreMasterKey reads the base64 master key from the one source named.
func restoreMasterKey(envName, file string) ([]byte, error) {
	var encoded string
	switch {
	case (envName == "") == (file == ""):
		return nil, errors.New("give the master key with exactly one of --master-key-env NAME and --master-key-file PATH")
	case envName != "":
		if encoded = os.Getenv(envName); encoded == "" {
			return nil, fmt.Errorf("the environment variable %s is empty or not set", envName)
		}
	default:
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("master key file: %v", err)
		}
		encoded = string(raw)
	}
	return decodeMasterKey(encoded)
}

// isTerminal reports whether f is a character device, such as a terminal.
func isTerminal(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// humanBytes formats a size in decimal units: 12.3 MB.
func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 4 {
		v, i = v/unit, i+1
	}
	return fmt.Sprintf("%.1f %cB", v, "kMGTP"[i])
}

// groupDigits formats n with thousands separators: 45,678.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
