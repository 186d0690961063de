package gen

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSummaryIsTheFirstSentenceInLowerCase(t *testing.T) {
	for _, c := range []struct{ name, desc, want string }{
		{"one sentence loses its full stop", "Reverses a soft delete.", "reverses a soft delete"},
		{"later sentences are dropped", "Clears the history; state and metadata stay. More here.", "clears the history; state and metadata stay"},
		{"a dot inside a word is kept", "Sets seq <= up_to_seq.5 as given", "sets seq <= up_to_seq.5 as given"},
		{"a pipe is escaped for the table", "Either a | b.", `either a \| b`},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, summary(c.desc))
		})
	}
}

func TestReplaceValueKeepsEveryOtherByte(t *testing.T) {
	doc := []byte("{\n  \"a\": { \"x\": 1 },\n  \"b\": {\n    \"enum\": [\"old\"],\n    \"z\": [1,2]\n  }\n}\n")
	got, err := replaceValue(doc, []string{"p", "q"}, "b", "enum")
	require.NoError(t, err)
	require.Equal(t, "{\n  \"a\": { \"x\": 1 },\n  \"b\": {\n    \"enum\": [\n      \"p\",\n      \"q\"\n    ],\n    \"z\": [1,2]\n  }\n}\n", string(got))

	_, err = replaceValue(doc, nil, "b", "missing")
	require.ErrorContains(t, err, `b has no member "missing"`)
}

func TestObjectKeysAreInDocumentOrder(t *testing.T) {
	keys, err := objectKeys([]byte(`{"properties": {"z": {}, "a": {"properties": {"n": 1}}, "m": 2}}`), "properties")
	require.NoError(t, err)
	require.Equal(t, []string{"z", "a", "m"}, keys)
}

func TestAFieldTypeWithoutAReaderIsAnError(t *testing.T) {
	type odd struct {
		F float64 `msgpack:"f"`
	}
	err := readerGo(&bytes.Buffer{}, reflect.TypeFor[odd](), nil, nil)
	require.ErrorContains(t, err, "field odd.F has type float64, which the decoder has no reader for")
}

func TestAFieldWithoutAMsgpackKeyIsAnError(t *testing.T) {
	type untagged struct{ F string }
	err := readerGo(&bytes.Buffer{}, reflect.TypeFor[untagged](), nil, nil)
	require.ErrorContains(t, err, "field untagged.F has no msgpack key")
}
