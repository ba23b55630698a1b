package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// auditCommand is "caddy vault audit verify|key".
func auditCommand() *cobra.Command {
	audit := &cobra.Command{Use: "audit", Short: "Verifies the tamper-evident audit chains"}
	verify := &cobra.Command{
		Use:   "verify (--tenant ID [--since SEQ|TIME] | --backup FILE (--master-key-env NAME | --master-key-file PATH) [--tenant ID] | --file PATH (--tenant ID | --key-file K | --backup FILE ...))",
		Short: "Verifies a tenant's audit chain in the running vault, in a backup, or in an exported log file",
		Long: `
Verifies audit chains and prints one JSON report per tenant: the records
verified and the faults found (gap, modified, reordered, truncated,
forked, checkpoint), with sequence numbers and never with data. It exits
with status 1 when a chain has a fault.

  --tenant ID [--since SEQ|TIME]
      the chain in the running vault, through the admin API.
  --backup FILE (--master-key-env NAME | --master-key-file PATH) [--tenant ID]
      the chains in a backup, offline, with the master key it was taken
      with.
  --file PATH
      the vault.audit lines of an exported log file (format json), with
      the keys of --key-file (what "caddy vault audit key" printed), of
      --backup with the master key, or else of the running vault
      (--tenant). The file is compared with the chain's head there: lines
      missing at its end are reported as truncated.`,
		Args: cobra.NoArgs,
		RunE: runVault(cmdAuditVerify),
	}
	verify.Flags().String("tenant", "", "Id of the tenant")
	verify.Flags().String("since", "", "Verify from this sequence number or RFC 3339 time on")
	verify.Flags().String("file", "", "Exported log file to verify")
	verify.Flags().String("backup", "", "Backup file to verify, or to take the keys from")
	verify.Flags().String("key-file", "", `File holding what "caddy vault audit key" printed`)
	verify.Flags().String("master-key-env", "", "Environment variable holding the base64 master key (with --backup)")
	verify.Flags().String("master-key-file", "", "File holding the base64 master key (with --backup)")
	key := &cobra.Command{
		Use:   "key --tenant ID",
		Short: "Prints the key that verifies a tenant's exported audit lines, and the chain's head",
		Args:  cobra.NoArgs,
		RunE: runVault(func(fl caddycmd.Flags) (int, error) {
			tenant := fl.String("tenant")
			if tenant == "" {
				return caddy.ExitCodeFailedStartup, errors.New("--tenant is required")
			}
			return adminCall(fl, http.MethodGet, "/vault/audit/key?tenant="+url.QueryEscape(tenant), nil)
		}),
	}
	key.Flags().String("tenant", "", "Id of the tenant (required)")
	for _, c := range []*cobra.Command{verify, key} {
		addAdminFlags(c)
		audit.AddCommand(c)
	}
	return audit
}

func cmdAuditVerify(fl caddycmd.Flags) (int, error) {
	tenant, file, backup, keyFile := fl.String("tenant"), fl.String("file"), fl.String("backup"), fl.String("key-file")
	since, err := vaultstore.ParseAuditSince(fl.String("since"))
	if err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--since: %w", err)
	}
	var reports []*vaultstore.AuditChainReport
	switch {
	case file != "":
		keys, heads := vaultstore.AuditFileKeys{}, vaultstore.AuditFileHeads{}
		switch {
		case keyFile != "":
			if err := readAuditKeyFile(keyFile, keys, heads); err != nil {
				return caddy.ExitCodeFailedStartup, err
			}
		case backup != "":
			ba, err := verifyBackupFile(fl, backup, tenant, vaultstore.AuditSince{})
			if err != nil {
				return caddy.ExitCodeFailedStartup, err
			}
			keys, heads = ba.Keys, ba.Heads
		case tenant != "":
			var h auditKeyHandout
			if err := adminGetJSON(fl, "/vault/audit/key?tenant="+url.QueryEscape(tenant), &h); err != nil {
				return caddy.ExitCodeFailedStartup, err
			}
			keys[h.TenantID], heads[h.TenantID] = h.Key, h.HeadSeq
		default:
			return caddy.ExitCodeFailedStartup, errors.New("--file needs the keys: --key-file, --backup with the master key, or --tenant (from the running vault)")
		}
		f, err := os.Open(file)
		if err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
		defer f.Close()
		if reports, err = vaultstore.VerifyAuditFile(f, keys, heads, tenant); err != nil {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("%s: %w", file, err)
		}
	case backup != "":
		ba, err := verifyBackupFile(fl, backup, tenant, since)
		if err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
		reports = ba.Reports
	case tenant != "":
		var rep vaultstore.AuditChainReport
		q := "tenant=" + url.QueryEscape(tenant)
		if v := fl.String("since"); v != "" {
			q += "&since=" + url.QueryEscape(v)
		}
		if err := adminGetJSON(fl, "/vault/audit/verify?"+q, &rep); err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
		reports = []*vaultstore.AuditChainReport{&rep}
	default:
		return caddy.ExitCodeFailedStartup, errors.New("give --tenant, --backup or --file")
	}
	out, _ := json.MarshalIndent(reports, "", "  ")
	os.Stdout.Write(append(out, '\n'))
	var bad []string
	for _, r := range reports {
		if !r.OK {
			first := ""
			if len(r.Faults) > 0 {
				first = fmt.Sprintf(", the first: %s at %d (%s)", r.Faults[0].Kind, r.Faults[0].Seq, r.Faults[0].Detail)
			}
			bad = append(bad, fmt.Sprintf("tenant %s: %d faults%s", r.TenantID, r.FaultCount, first))
		}
	}
	if len(bad) > 0 {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("the audit chain does not verify: %s", strings.Join(bad, "; "))
	}
	return caddy.ExitCodeSuccess, nil
}

// verifyBackupFile verifies the chains in a backup with the master key
// the flags name.
func verifyBackupFile(fl caddycmd.Flags, path, tenant string, since vaultstore.AuditSince) (*vaultstore.BackupAudit, error) {
	key, err := restoreMasterKey(fl.String("master-key-env"), fl.String("master-key-file"))
	if err != nil {
		return nil, err
	}
	defer clear(key)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ba, err := vaultstore.VerifyBackupAudit(context.Background(), f, key, tenant, since)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ba, nil
}

// readAuditKeyFile reads what "caddy vault audit key" printed: one
// handout, or a list of them.
func readAuditKeyFile(path string, keys vaultstore.AuditFileKeys, heads vaultstore.AuditFileHeads) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var list []auditKeyHandout
	if err := json.Unmarshal(raw, &list); err != nil {
		var one auditKeyHandout
		if err := json.Unmarshal(raw, &one); err != nil {
			return fmt.Errorf("--key-file %s: not what caddy vault audit key prints: %v", path, err)
		}
		list = []auditKeyHandout{one}
	}
	for _, h := range list {
		if h.TenantID == "" || h.Key == "" {
			return fmt.Errorf("--key-file %s: a key without tenant_id or key", path)
		}
		keys[h.TenantID], heads[h.TenantID] = h.Key, h.HeadSeq
	}
	return nil
}

// adminGetJSON GETs uri from the admin API into v.
func adminGetJSON(fl caddycmd.Flags, uri string, v any) error {
	addr, err := adminAddress(fl)
	if err != nil {
		return err
	}
	resp, err := adminRequest(addr, http.MethodGet, uri, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return json.NewDecoder(bytes.NewReader(body)).Decode(v)
}
