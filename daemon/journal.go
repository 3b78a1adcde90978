package daemon

import (
	"errors"

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/store"
)

// storeJournal keeps the cloud client's intents (ClientTokens) in the
// store, so that they are on disk before each mutating call.
type storeJournal struct{ s *store.Store }

func (j storeJournal) Intent(key string) (cloud.Intent, bool, error) {
	in, err := j.s.GetIntent(key)
	if errors.Is(err, store.ErrNotFound) {
		return cloud.Intent{}, false, nil
	}
	if err != nil {
		return cloud.Intent{}, false, err
	}
	return cloud.Intent{Key: in.Key, Kind: string(in.Kind), ClientToken: in.ClientToken, ENIID: in.ENIID,
		VSwitchID: in.VSwitchID, Count: in.Count, CreatedAt: in.CreatedAt}, true, nil
}

func (j storeJournal) Record(in cloud.Intent) error {
	return j.s.PutIntent(store.Intent{Key: in.Key, Kind: store.IntentKind(in.Kind), ClientToken: in.ClientToken,
		ENIID: in.ENIID, VSwitchID: in.VSwitchID, Count: in.Count, CreatedAt: in.CreatedAt})
}

func (j storeJournal) Forget(key string) error {
	err := j.s.DeleteIntent(key)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
