package convlog_test

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/client"
)

// agentdRoutes are the routes agentd serve adds beside the HTTP API's.
var agentdRoutes = []string{"GET /metrics"}

// routerRoutes are the routes httpapi's router registers, "METHOD /path".
// Listing them sends no request, so the client is never used.
func routerRoutes(t *testing.T) []string {
	t.Helper()
	s, err := httpapi.New(httpapi.Config{Client: &client.Client{}, Auth: httpapi.Auth{Disabled: true}})
	require.NoError(t, err)
	var out []string
	for _, r := range s.Routes() {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// openAPIRoutes are the operations of agentd/httpapi/openapi.json.
func openAPIRoutes(t *testing.T) []string {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	b, err := os.ReadFile("agentd/httpapi/openapi.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	var out []string
	for path, item := range doc.Paths {
		for m := range item {
			if slices.Contains([]string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}, m) {
				out = append(out, strings.ToUpper(m)+" "+path)
			}
		}
	}
	return out
}

// docGoRoutes are the lines of the "# Routes" list of agentd/httpapi/doc.go.
func docGoRoutes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("agentd/httpapi/doc.go")
	require.NoError(t, err)
	_, list, ok := strings.Cut(string(b), "// # Routes\n")
	require.True(t, ok, "doc.go has a # Routes section")
	list, _, _ = strings.Cut(list, "\n//\n// ") // the list ends at the first paragraph after it
	line := regexp.MustCompile(`(?m)^//\t(GET|POST|PUT|DELETE|PATCH)\s+(/\S*)`)
	var out []string
	for _, m := range line.FindAllStringSubmatch(list, -1) {
		out = append(out, m[1]+" "+m[2])
	}
	return out
}

// section returns the text of README's section title (## title) up to the
// next section of the same level.
func section(t *testing.T, readme, title string) string {
	t.Helper()
	_, s, ok := strings.Cut(readme, "\n## "+title+"\n")
	require.True(t, ok, "README.md has a section %q", title)
	s, _, _ = strings.Cut(s, "\n## ")
	return s
}

// tableFirstCells returns the first cell of every body row of the first
// Markdown table in s.
func tableFirstCells(s string) []string {
	var out []string
	header := 0
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "|") {
			if header > 0 {
				break
			}
			continue
		}
		header++
		if header <= 2 { // the header and its |---| line
			continue
		}
		cells := strings.Split(l, "|")
		out = append(out, strings.TrimSpace(cells[1]))
	}
	return out
}

// readmeRoutes are the routes of the README's HTTP contract table: each
// `METHOD[/METHOD...] path` in a row's first cell, where a path starting
// with … is under /v1/threads/{id}.
func readmeRoutes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	code := regexp.MustCompile("`([^`]+)`")
	var out []string
	for _, cell := range tableFirstCells(section(t, string(b), "HTTP contract")) {
		for _, m := range code.FindAllStringSubmatch(cell, -1) {
			methods, path, ok := strings.Cut(m[1], " ")
			require.True(t, ok, "README route %q is METHOD path", m[1])
			if rest, ok := strings.CutPrefix(path, "…"); ok {
				path = "/v1/threads/{id}" + rest
			}
			for meth := range strings.SplitSeq(methods, "/") {
				out = append(out, meth+" "+path)
			}
		}
	}
	return out
}

// sameRoutes fails t with every route one list has and the other lacks.
func sameRoutes(t *testing.T, wantName string, want []string, gotName string, got []string) {
	t.Helper()
	w, g := map[string]bool{}, map[string]bool{}
	for _, r := range want {
		w[r] = true
	}
	for _, r := range got {
		assert.False(t, g[r], "%s lists %s twice", gotName, r)
		g[r] = true
	}
	for _, r := range slices.Sorted(maps.Keys(w)) {
		assert.True(t, g[r], "%s lacks %s, which %s has", gotName, r, wantName)
	}
	for _, r := range slices.Sorted(maps.Keys(g)) {
		assert.True(t, w[r], "%s lists %s, which %s does not have", gotName, r, wantName)
	}
}

// The route tables say what the router serves: openapi.json,
// agentd/httpapi/doc.go and the README's HTTP contract list exactly the
// router's routes (the README also agentd's own /metrics).
// (agentd/httpapi's TestOpenAPIDocumentsEveryRoute checks each operation.)
func TestEveryRouteTableListsEveryRoute(t *testing.T) {
	router := routerRoutes(t)
	require.NotEmpty(t, router)
	sameRoutes(t, "the router", router, "openapi.json", openAPIRoutes(t))
	sameRoutes(t, "the router", router, "agentd/httpapi/doc.go's # Routes", docGoRoutes(t))
	sameRoutes(t, "the router and agentd serve", append(slices.Clone(router), agentdRoutes...), "README.md's HTTP contract", readmeRoutes(t))
}

// The README's Layout table names every part of the repository: every
// top-level folder with Go code, every package directly under agentd/ and
// internal/, and nothing that is not there; its agentd row names every
// agentd command.
func TestLayoutTableNamesEveryPart(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	layout := section(t, string(b), "Layout")
	listed := map[string]string{}
	code := regexp.MustCompile("^`([^`]+)`$")
	rows := regexp.MustCompile(`(?m)^\| ` + "`([^`]+)`" + ` \| (.*) \|$`)
	for _, cell := range tableFirstCells(layout) {
		m := code.FindStringSubmatch(cell)
		require.NotNil(t, m, "a Layout row names one folder: %q", cell)
		dir := strings.TrimSuffix(m[1], "/")
		assert.DirExists(t, dir, "README's Layout lists %s", m[1])
		listed[dir] = ""
	}
	for _, m := range rows.FindAllStringSubmatch(layout, -1) {
		listed[strings.TrimSuffix(m[1], "/")] = m[2]
	}

	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "./...").CombinedOutput()
	require.NoError(t, err, string(out))
	wd, err := os.Getwd()
	require.NoError(t, err)
	want := map[string]bool{}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(wd, dir)
		require.NoError(t, err)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		switch {
		case rel == ".":
		case parts[0] == "agentd" || parts[0] == "internal":
			if len(parts) >= 2 {
				want[parts[0]+"/"+parts[1]] = true
			}
			if parts[0] == "agentd" {
				want["agentd"] = true
			}
		default:
			want[parts[0]] = true
		}
	}
	for _, dir := range []string{"bench", "js"} { // modules of their own
		want[dir] = true
	}
	for _, dir := range slices.Sorted(maps.Keys(want)) {
		_, ok := listed[dir]
		assert.True(t, ok, "README's Layout lacks %s", dir)
	}

	help, err := exec.Command("go", "run", "./agentd", "--help").CombinedOutput()
	require.NoError(t, err, string(help))
	_, cmds, ok := strings.Cut(string(help), "Available Commands:\n")
	require.True(t, ok, string(help))
	cmds, _, _ = strings.Cut(cmds, "\n\n")
	for l := range strings.SplitSeq(cmds, "\n") {
		name := strings.Fields(l)[0]
		if name == "help" || name == "completion" {
			continue
		}
		assert.Contains(t, listed["agentd"], "`"+name+"`", "README's Layout row of agentd/ names the command %s", name)
	}
}

// helpCommands returns the names under "Available Commands:" in an
// agentd --help output, without help and completion.
func helpCommands(t *testing.T, help string) []string {
	t.Helper()
	_, cmds, ok := strings.Cut(help, "Available Commands:\n")
	if !ok {
		return nil
	}
	cmds, _, _ = strings.Cut(cmds, "\n\n")
	var out []string
	for l := range strings.SplitSeq(cmds, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] != "help" && f[0] != "completion" {
			out = append(out, f[0])
		}
	}
	return out
}

// The README's paragraph on operator commands (with the list after it)
// names every command agentd
// has besides serve, each with all its subcommands ("`agentd thread
// list|get|...`"), so a new command cannot go unmentioned.
func TestOperatorCommandsParagraphNamesEveryCommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "agentd")
	out, err := exec.Command("go", "build", "-o", bin, "./agentd").CombinedOutput()
	require.NoError(t, err, string(out))
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, para, ok := strings.Cut(string(readme), "\nOperator commands ")
	require.True(t, ok, "README.md has no paragraph starting \"Operator commands\"")
	intro, rest, _ := strings.Cut(para, "\n\n")
	list, _, _ := strings.Cut(rest, "\n\n")
	if !strings.HasPrefix(list, "- ") {
		list = "" // the paragraph has no list of commands after it
	}
	para = strings.Join(strings.Fields(intro+" "+list), " ")

	help, err := exec.Command(bin, "--help").CombinedOutput()
	require.NoError(t, err, string(help))
	for _, name := range helpCommands(t, string(help)) {
		if name == "serve" {
			continue
		}
		sub, err := exec.Command(bin, name, "--help").CombinedOutput()
		require.NoError(t, err, string(sub))
		subs := helpCommands(t, string(sub))
		m := regexp.MustCompile("`agentd " + name + `(?: ([a-z|-]+))?` + "`").FindStringSubmatch(para)
		if !assert.NotNil(t, m, "README's operator commands paragraph lacks `agentd %s`", name) {
			continue
		}
		listed := strings.Split(m[1], "|")
		for _, s := range subs {
			assert.Contains(t, listed, s, "README's operator commands paragraph lacks `agentd %s %s`", name, s)
		}
	}
}
