package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "vault",
		Usage: "tenant create|list|delete | hostname add|list|delete [--address <admin>]",
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

The admin endpoint is found like Caddy's own commands find it: --address,
or the admin address of --config, or the default localhost:2019.`,
		CobraFunc: func(cmd *cobra.Command) {
			tenant := &cobra.Command{Use: "tenant", Short: "Creates, lists and deletes tenants"}
			create := &cobra.Command{
				Use:   "create --name NAME --type test|production",
				Short: "Creates a tenant and prints its management key",
				Args:  cobra.NoArgs,
				RunE:  caddycmd.WrapCommandFuncForCobra(cmdTenantCreate),
			}
			create.Flags().String("name", "", "Name of the tenant (required)")
			create.Flags().String("type", "test", "Tenant type: test or production")
			list := &cobra.Command{
				Use:   "list",
				Short: "Lists tenants",
				Args:  cobra.NoArgs,
				RunE:  caddycmd.WrapCommandFuncForCobra(cmdTenantList),
			}
			del := &cobra.Command{
				Use:   "delete ID",
				Short: "Deletes a tenant with all its data and keys",
				Args:  cobra.ExactArgs(1),
				RunE: func(c *cobra.Command, args []string) error {
					return caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
						return adminCall(fl, http.MethodDelete, "/vault/tenants/"+args[0], nil)
					})(c, args)
				},
			}
			for _, c := range []*cobra.Command{create, list, del, quotasCommand()} {
				addAdminFlags(c)
				tenant.AddCommand(c)
			}
			cmd.AddCommand(tenant, hostnameCommand(), rotateMasterKeyCommand(), rotateDataKeyCommand())
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
		return caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
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
		RunE: caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
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
		RunE: caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
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

// hostnameCommand is "caddy vault hostname add|list|delete".
func hostnameCommand() *cobra.Command {
	hostname := &cobra.Command{Use: "hostname", Short: "Registers whitelabel hostnames for proxies"}
	add := &cobra.Command{
		Use:   "add --tenant ID --proxy PROXY_ID HOSTNAME",
		Short: "Registers a hostname for a proxy",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
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
		RunE: caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
			return adminCall(fl, http.MethodGet, "/vault/tenants/"+url.PathEscape(fl.String("tenant"))+"/hostnames", nil)
		}),
	}
	del := &cobra.Command{
		Use:   "delete --tenant ID HOSTNAME",
		Short: "Removes a hostname",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
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
// to standard output.
func adminCall(fl caddycmd.Flags, method, uri string, body []byte) (int, error) {
	addr, err := caddycmd.DetermineAdminAPIAddress(fl.String("address"), nil, fl.String("config"), fl.String("adapter"))
	if err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("finding the admin address: %v", err)
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	resp, err := caddycmd.AdminAPIRequest(addr, method, uri, nil, reader)
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
