// Package store is the node daemon's local store: one bbolt file that
// records, per pod, what the daemon handed out (Attachment), the last known
// PodInfo of pods already gone from the API server, and the cloud operations
// in flight (Intent), so that a restarted daemon neither leaks nor double-
// allocates.
//
// # Layout (schema 2)
//
// Buckets, all values JSON except meta's (plain strings):
//
//	meta         schema = "2", writer = "terway-sim", instance = the ECS
//	             instance ID the store belongs to (absent: unknown; see
//	             Store.Instance, Store.SetInstance) (+ import bookkeeping)
//	attachments  "namespace/name" -> Attachment
//	pods         "namespace/name" -> PodInfo (pods already gone)
//	intents      Intent.Key       -> Intent (cloud calls in flight)
//	relation     only in a DB imported from Terway: Terway's own records,
//	             kept byte for byte and never read again after the import
//
// Every record of the first three buckets is mirrored in memory; reads are
// served from the mirror, which is updated only after the bbolt transaction
// that wrote it has committed. Records are decoded strictly (unknown fields
// are an error): any change to a record's shape must bump SchemaVersion.
//
// Schema history: 1, the first; 2 added meta/instance. Open migrates a
// schema-1 file to 2 in place (its instance is unknown) and says so in
// Warnings; a daemon of schema 1 then refuses the file (ErrNewerSchema).
//
// # What Open accepts
//
//   - an absent or empty file, or a bbolt file without buckets: initialised;
//   - our own schema: read (schema 1: read and migrated to 2);
//   - a Terway-written DB (bucket "relation", no "meta" bucket; Terway's
//     /var/lib/cni/terway/ResRelation.db): imported when Options.ImportTerway
//     is set, refused with ErrTerwayDB otherwise;
//   - a newer schema: refused with ErrNewerSchema;
//   - a damaged bbolt file: refused with ErrDamaged (below);
//   - anything else (not bbolt, unreadable meta pages, unknown buckets or
//     writer, Terway's pod.db, a nested bucket where records belong):
//     refused with ErrUnknownFormat.
//
// Nothing is ever silently misread: a file is either read in full or refused
// with an error that names the path and says why. A refused file is left
// byte for byte as it was, and so is its directory.
//
// # Damaged files
//
// ErrUnknownFormat is a file that is not ours; ErrDamaged is a file that
// was a bbolt database (its meta pages are valid) whose other pages are not
// what bbolt wrote. Before anything is written, Open reads every key and
// value of every bucket and runs bbolt's consistency check (Tx.Check: page
// types, page references, freelist, key order); a finding, a bbolt panic
// (bbolt asserts "Page expected to be ..." on a garbage page, and panics
// at open on a garbage freelist page) or a memory fault (a page number
// pointing outside the file) is an error wrapping ErrDamaged instead of a
// crash, on one line, naming the path and RebuildHint (terwayd
// --rebuild-store). A panic inside bbolt's own open leaves no descriptor or
// lock behind (only its memory mapping, which bbolt does not hand back). A
// record of our own buckets that does not decode is damage too: that error
// wraps both ErrDamaged and ErrUnknownFormat. A Terway record that does not
// convert stays ErrUnknownFormat only (the file is Terway's).
//
// After Open, bbolt panics and faults met by Update, SetInstance and Tx
// operations are errors wrapping ErrDamaged as well (the transaction is
// rolled back); a panic of the caller's own Update function is re-raised.
//
// MoveAside renames a refused file to "<path>.damaged-<UTC time>" (0600)
// under its lock, so that a new store can be opened at the path; terwayd
// --rebuild-store does that and rebuilds the store from the node's truth.
//
// # Terway import
//
// Each record of Terway's "relation" bucket (key "ns/name", value
// PodResources{Resources []ResourceItem, PodInfo, NetNs, ContainerID,
// NetConf}) becomes an Attachment in the same transaction that writes our
// "meta" bucket, so an import is all or nothing. ContainerID (written by
// Terway main only) and NetConf are carried over when present; IfName is
// "eth0"; CreatedAt, StickyUntil and PodGone are zero (Terway does not record
// them). ENI MAC and IPs missing from an old record are recovered from its
// resource ID ("<mac>" for eni, "<mac>.<ip>" or "<mac>.<v4>-<v6>" for eniIp);
// an ENI ID cannot be and stays empty. EIP details (extra_eip_info) and
// Terway's bandwidth fields are dropped. A record of a type we do not know
// aborts the import with an error naming its key.
//
// The "relation" bucket is left untouched, so Terway could still open the
// file after a rollback — but it would see the pods as they were at the
// import: changes made by this daemon afterwards are not written back. A
// hash of the bucket is kept in "meta"; if Terway writes to the file after
// the import, the next Open reports it in Warnings.
//
// # Files
//
// Parent directories are created 0700, the file 0600; an existing file with
// another mode is chmod-ed to 0600 and an existing store directory to 0700
// (each reported in Warnings), once the file has been accepted. A shared
// directory (sticky bit, as /tmp) or / is left alone with a warning: give
// the store a directory of its own.
// bbolt's exclusive file lock is taken with Options.Timeout, so a second
// process fails fast with ErrLocked instead of hanging. Every commit is
// fsync-ed unless Options.NoSync is set (tests only).
package store
