/**
 * The POSIX shell scripts behind the exec-backed file operations (`files.ts`). They run
 * in the container with the operation's root as working directory and need only `sh`,
 * `realpath`, `stat`, `xargs`, `mv`, `cat` (busybox or coreutils). Exit codes: 2 missing,
 * 3 outside the root, 4 not a directory, 6 a directory where a file goes.
 */

/**
 * Shell helpers every script starts with; they run inside the container with the
 * root as working directory, so symlinks are resolved by the container's own view of
 * its filesystem. `resolve REL` sets `R` to the real path of `./REL` (`.` for '') or
 * fails: 2 missing (or a dangling link), 3 resolving outside the root. `mkdirs REL`
 * creates missing directories one level at a time, resolving every existing level first,
 * so nothing is ever created through a link that points out; 4: not a directory.
 */
export const PRELUDE = `
root=$(pwd -P) || exit 70
inside() { case "$1" in "$root"|"$root"/*) return 0;; esac; return 1; }
resolve() {
  t=./$1; [ -n "$1" ] || t=.
  [ -e "$t" ] || return 2
  R=$(realpath "$t" 2>/dev/null && echo x) || return 3
  R=\${R%?x}
  inside "$R" || return 3
}
mkdirs() {
  cur=.; rest=$1
  while [ -n "$rest" ]; do
    c=\${rest%%/*}
    if [ "$c" = "$rest" ]; then rest=; else rest=\${rest#*/}; fi
    cur=$cur/$c
    if [ -e "$cur" ] || [ -L "$cur" ]; then
      resolve "\${cur#./}" || return $?
      [ -d "$R" ] || return 4
    else
      mkdir "$cur" || return 5
    fi
  done
  resolve "$1" || return $?
  [ -d "$R" ] || return 4
}
`

/** `$1` a directory: NUL-terminated names, an empty name, then `stat` lines (mode, size, mtime, name). */
export const LIST_SCRIPT = `${PRELUDE}
resolve "$1" || exit $?
[ -d "$R" ] || exit 4
cd "$R" || exit 2
list() { for f in * .[!.]* ..?*; do if [ -e "$f" ] || [ -L "$f" ]; then printf './%s\\0' "$f"; fi; done; }
list
printf '\\0'
list | xargs -0 -r stat -c '%f %s %Y %n' 2>/dev/null
exit 0`

/** Every argument resolved: the root, then per path `ok\\0<real path>\\0` or `<code>\\0\\0`. */
export const RESOLVE_SCRIPT = `${PRELUDE}
printf '%s\\0' "$root"
for p in "$@"; do
  if resolve "$p"; then printf 'ok\\0%s\\0' "$R"; else printf '%s\\0\\0' "$?"; fi
done`

/** `$1` a new staging directory under the root: created safely; the root's real path and its own printed, NUL between. */
export const STAGE_SCRIPT = `${PRELUDE}
mkdirs "$1" || exit $?
printf '%s\\0%s' "$root" "$R"`

/** `$1` the staging dir, `$2` the destination, then the file names (staged as 0, 1, ...). */
export const COMMIT_SCRIPT = `${PRELUDE}
stage=$1; dest=$2; shift 2
mkdirs "$dest" || exit $?
d=$R
i=0
for name in "$@"; do
  if [ -d "$d/$name" ] && [ ! -L "$d/$name" ]; then printf '%s' "$i"; exit 6; fi
  i=$((i+1))
done
i=0
for name in "$@"; do
  mv -fT "$stage/$i" "$d/$name" || exit 7
  i=$((i+1))
done
rm -rf "$stage"
exit 0`

/**
 * One file to `$2`: into it when `$2` is an existing directory (as `$2/$3`), else at `$2`
 * itself (its parent created). Prints the stored path relative to the root.
 */
export const COMMIT_ONE_SCRIPT = `${PRELUDE}
stage=$1; dest=$2; name=$3
if [ -d "./$dest" ]; then
  mkdirs "$dest" || exit $?
  out="$dest/$name"; field=files
else
  case "$dest" in */*) parent=\${dest%/*};; *) parent=;; esac
  name=\${dest##*/}
  mkdirs "$parent" || exit $?
  p=$R
  # An existing name (a link too) must resolve inside the root.
  if [ -e "./$dest" ] || [ -L "./$dest" ]; then resolve "$dest" || exit $?; fi
  R=$p
  out=$dest; field=path
fi
d=$R
if [ -d "$d/$name" ] && [ ! -L "$d/$name" ]; then printf '%s' "$field"; exit 6; fi
mv -fT "$stage/0" "$d/$name" || exit 7
rm -rf "$stage"
printf '%s' "$out"`

/** `$1` a file: its bytes on stdout. */
export const READ_SCRIPT = `${PRELUDE}
resolve "$1" || exit $?
[ -d "$R" ] && exit 6
exec cat "$R"`
