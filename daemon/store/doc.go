// Package store is the node daemon's local store: one bbolt file that
// records, per pod, what the daemon handed out (Attachment), the last known
// PodInfo of pods already gone from the API server, and the cloud operations
// in flight (Intent), so that a restarted daemon neither leaks nor double-
// allocates.
//
// # Layout (schema 1)
//
// Buckets, all values JSON:
//
//	meta         schema = "1", writer = "terway-sim" (+ import bookkeeping)
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
// # What Open accepts
//
//   - an absent or empty file, or a bbolt file without buckets: initialised;
//   - our own schema: read;
//   - a Terway-written DB (bucket "relation", no "meta" bucket; Terway's
//     /var/lib/cni/terway/ResRelation.db): imported when Options.ImportTerway
//     is set, refused with ErrTerwayDB otherwise;
//   - a newer schema: refused with ErrNewerSchema;
//   - anything else (not bbolt, corrupt, unknown buckets, Terway's pod.db,
//     a record that does not decode): refused with ErrUnknownFormat.
//
// Nothing is ever silently misread: a file is either read in full or refused
// with an error that names the path and says why.
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
// group or other permission bits is chmod-ed to 0600 (reported in Warnings).
// bbolt's exclusive file lock is taken with Options.Timeout, so a second
// process fails fast with ErrLocked instead of hanging. Every commit is
// fsync-ed unless Options.NoSync is set (tests only).
package store
