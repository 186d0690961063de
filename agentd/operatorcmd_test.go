package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/provision"
)

func TestOperatorInitKeepsSecretsPrivateAndAnExistingOperator(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ops")
	cf := connFlags{Stream: "CONVLOG", Prefix: "conv"}
	created, err := operatorInit(dir, "test", "/var/jwt", cf)
	require.NoError(t, err)
	require.True(t, created)
	secret := map[string]bool{opSigningFile: true, opTenantSignFile: true, opSysCredsFile: true, opConvlogCredsFile: true,
		opJWTFile: false, opSysJWTFile: false, opConvlogJWTFile: false, opServerConfFile: false}
	before := map[string][]byte{}
	for name, isSecret := range secret {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
		want := fs.FileMode(0o644)
		if isSecret {
			want = 0o600
		}
		require.Equal(t, want, st.Mode().Perm(), name)
		before[name], _ = os.ReadFile(filepath.Join(dir, name))
	}
	od := operatorDir(dir)
	op, err := jwt.DecodeOperatorClaims(strings.TrimSpace(string(before[opJWTFile])))
	require.NoError(t, err)
	sys, err := jwt.DecodeAccountClaims(string(before[opSysJWTFile]))
	require.NoError(t, err)
	require.Equal(t, sys.Subject, op.SystemAccount)
	require.True(t, op.DidSign(sys), "the operator's signing key signs its accounts")
	conf := string(before[opServerConfFile])
	require.Contains(t, conf, "system_account: "+sys.Subject)
	require.Contains(t, conf, `dir: "/var/jwt"`)
	other, err := od.serverConf("/elsewhere")
	require.NoError(t, err)
	require.Equal(t, strings.Replace(conf, "/var/jwt", "/elsewhere", 1), other)

	created, err = operatorInit(dir, "again", "/var/jwt", cf)
	require.NoError(t, err)
	require.False(t, created, "an existing operator is kept")
	for name, b := range before {
		after, _ := os.ReadFile(filepath.Join(dir, name))
		require.Equal(t, b, after, "%s unchanged", name)
	}

	_, err = od.account("acme")
	require.True(t, errors.Is(err, fs.ErrNotExist), "no account before tenant-create: %v", err)
	ac, err := od.tenantAccount("acme", provision.Config{})
	require.NoError(t, err)
	require.Equal(t, "convlog_tenant_acme", ac.Name)
	_, err = od.tenantAccount("bad.tenant", provision.Config{})
	var u usageError
	require.ErrorAs(t, err, &u)
}
