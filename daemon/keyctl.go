package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/exo-rack/exo/client"
)

// Key rotation run against a daemon through its local API (exo key): stage
// the next key, then wait until the host sends under it.

// ReadKeys reads the status of the daemon behind c for its key part; an
// error when the daemon predates key rotation.
func ReadKeys(ctx context.Context, c *client.Client) (KeyStatus, error) {
	var st struct {
		Keys *KeyStatus `json:"keys"`
	}
	raw, err := c.StatusRaw(ctx)
	if err != nil {
		return KeyStatus{}, err
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return KeyStatus{}, fmt.Errorf("status: %w", err)
	}
	if st.Keys == nil {
		return KeyStatus{}, errors.New("the daemon's status has no keys: it predates key rotation")
	}
	return *st.Keys, nil
}

// StageKey stages the group key in the file at path (a path on the
// daemon's host) at the daemon behind c, and returns its key status then.
func StageKey(ctx context.Context, c *client.Client, path string) (KeyStatus, error) {
	if err := c.StageKey(ctx, path); err != nil {
		return KeyStatus{}, fmt.Errorf("stage %s: %w", path, err)
	}
	return ReadKeys(ctx, c)
}

// NewSlot is the slot of the key staged last: the slot the host does not
// send under while the key waits for the members' announcements, the one
// it sends under once switched.
func (ks KeyStatus) NewSlot() int {
	if !ks.Staged {
		return ks.SendPhase // switched at once
	}
	return 1 - ks.SendPhase
}

// WaitKeySwitch reads the key status of the daemon behind c every 100 ms
// until no staged key waits: the host sends under the new key. When ctx
// ends first, it returns the last status read (the members it waits for)
// and ctx's error.
func WaitKeySwitch(ctx context.Context, c *client.Client, ks KeyStatus) (KeyStatus, error) {
	for ks.Staged {
		select {
		case <-ctx.Done():
			return ks, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		next, err := ReadKeys(ctx, c)
		if err != nil {
			return ks, err
		}
		ks = next
	}
	return ks, nil
}
