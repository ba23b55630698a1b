package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "vault",
		Usage: "tenant create|list|delete [--address <admin>]",
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
			for _, c := range []*cobra.Command{create, list, del} {
				addAdminFlags(c)
				tenant.AddCommand(c)
			}
			cmd.AddCommand(tenant)
		},
	})
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
