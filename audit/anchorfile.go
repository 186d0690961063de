package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// LoadAnchor reads an anchor file [SaveAnchor] wrote, the JSON of an
// [Anchor]: nil and no error when path does not exist (a first
// verification trusts what it finds). A file whose content is not an
// anchor with a message sequence and a hash is an error, as is the file
// system's.
func LoadAnchor(path string) (*Anchor, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var a Anchor
	if err := json.Unmarshal(b, &a); err != nil || a.MsgSeq == 0 || a.Hash == "" {
		return nil, fmt.Errorf("audit: %s is not a checkpoint anchor {\"msg_seq\": N, \"hash\": \"...\"} (%v)", path, err)
	}
	return &a, nil
}

// SaveAnchor replaces the anchor file path with a: written with mode 0600
// to path+".tmp", then renamed over path, so a reader finds the old
// anchor or the new one.
func SaveAnchor(path string, a Anchor) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
