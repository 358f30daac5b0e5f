// Who holds a checkpoint folder's or run directory's lock (folder_lock.h), read from its LOCK
// file: the holder's identity as a lock records it, whether that process is gone (its lock may be
// taken over), and how to name it in a refusal. What the lock does with them: folder_lock.cpp,
// whose staleness bounds (FolderLock::kStaleSeconds, heartbeat_seconds) these judge by.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace zt::ckpt {

// This machine's host name, as a lock records it ("unknown-host" where it cannot be read).
std::string host_name();

// A lock file's text. A lock this code writes is a small regular file: anything else reads as
// nothing (a FIFO's open waited for a writer for ever; /dev/zero was read until the allocation
// failed). FolderLock's constructor refuses such a file by name first. Opened first, without
// blocking, and then looked at (on NFS an open revalidates the name, where a stat may be answered
// from a cache).
std::string read_lock_text(const std::string& path);

// Seconds since the file's last heartbeat (its mtime), or a negative value when it is gone.
double heartbeat_age(const std::string& path);

// What identifies this process's life on this machine beside its pid, for a lock to record: its
// start time in clock ticks after boot (exact, no wall clock), the boot and the pid namespace.
// Empty strings where /proc does not tell.
struct ProcessIdentity {
  std::string start_ticks, boot_id, pid_namespace;
};
ProcessIdentity own_identity();

// Whether the holder a lock's JSON names is gone (its lock may be taken over). A fresh heartbeat
// holds it. Past kStaleSeconds, on this host, in this boot and pid namespace, the pid decides:
// gone if it no longer runs, is a zombie, or is another process (its start ticks differ: the pid
// reused); a live holder keeps the lock (stopped by SIGSTOP or a scheduler's suspend, it continues
// later and would write beside a taker). Anywhere else, and for a lock without the identity, the
// stale heartbeat alone says gone. A dead pid on this host is gone at once, and so is a lock this
// code did not write (not JSON, no pid, fields of other types): it holds nothing.
bool holder_gone(const nlohmann::json& holder, double age, const std::string& my_host);

// Why a live holder's heartbeat stopped, for the refusal: "" while it beats.
std::string stale_holder_hint(const nlohmann::json& holder, double age);

// "device:inode" of a folder, "" where it cannot be read: what a lock records of the folder it
// locks, so that a lock copied with its folder (cp -a of a run directory) is known for a copy.
std::string folder_identity(const std::string& folder);

// Whether a lock names another folder than the one it lies in: copied there with its folder, so
// no process holds this one (its holder, alive or not, beats another lock). Told on the host and
// boot that wrote it only: another NFS client numbers the same folder's device otherwise.
bool lock_of_another_folder(const nlohmann::json& holder, const std::string& folder, const std::string& my_host,
                            double age);

// Who a lock names; a file this code did not write whole (empty after a power loss, not JSON, other
// fields) says so instead.
std::string describe_holder(const nlohmann::json& holder);

}  // namespace zt::ckpt
