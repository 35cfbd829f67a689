"""Secret scanner run on every write: credentials never enter memory.

The rules are data beside a small engine; each module imports only those listed before it:

- ``rule``: what a rule is (what, regex, anchors, confirm, generic) and the builders;
- ``exemptions``: what no rule reports (placeholders, known examples by hash, public keys);
- ``values``: the shared judgments of a value and a name (random, password-shaped, a reference);
- ``confirm``, ``confirm_heldout5``: the confirmers, each judging one kind of match in context;
- ``providers``, ``context``, ``heldout5``: the rule tables (prefixes and command lines, the
  generic context rules, the fifth held-out set's syntaxes), each listing what it covers;
- ``engine``: the table in order, the anchor search and the scans. The private names the
  tests read (``_RULES``, ``_Candidates``, ``_fold``, ``_scan_reference``...) live there.

Invariants:
- Only high-confidence patterns: a provider's fixed prefix plus a body of the
  right alphabet and length, a PEM private-key header followed by key material,
  or a key name that says "AWS secret" next to a 40-character value. Ordinary
  prose, Markdown, code that *names* keys (``api_key = os.environ["X"]``),
  UUIDs, git SHAs, sha256 hex and base64 hashes must not match: a false alarm
  blocks a legitimate write and teaches the model to distrust the check.
- Obvious placeholders (bodies made of x/X/*/0, AWS's documented ...EXAMPLE
  keys, a URL password that is only a word such as ``password`` or ``pass123``
  (one merely containing "pass" is real), ``${VAR}`` references, ``changeme``,
  pagination cursors such as ``nextPageToken``) are not
  secrets; nor are well-known documentation examples (GitHub's example token,
  the jwt.io token, Azurite's emulator key, Telegram's example bot token),
  recognised by the SHA-256 of the value so this package holds none of them, nor a
  URL whose password equals its user name (``postgres:postgres@localhost``).
- Passwords on a command line count (``mysql -pX``, ``curl -u user:X``,
  ``sshpass -p X``, ``--password X``); a flag alone (``mysql -p``, ``curl -u user``)
  makes the program prompt and is no secret.
- The generic rules (a key named like a password, secret or token assigned a
  real-looking value, as in ``.env`` files, and the rules that read context rather
  than a prefix) are reported only on lines where no specific rule fired, so one
  credential gives one problem.
- The context rule generalises the per-provider ones: a random value assigned or
  paired with a secret's name counts whatever the provider, unless the name or the
  value says it is public, an id, a hash, a reference or a placeholder. Base64 JSON is
  decoded and scanned with these same rules. A value public by design (a browser SDK's
  configuration, a published public shape, a JWT whose role is ``anon``) is no finding.
- Each held-out set's contexts became general rules, none naming one sample's values;
  the module that implements a set lists its contexts (the third's and fourth's:
  ``context`` and ``providers``; the fifth's: ``heldout5``).
- The path and a revision message are scanned with the same rules
  (``scan_path``, ``scan_message``); their problems say where, never what.
- Scanning is linear in the content: a rule's start is never preceded by a
  character its own body may contain (a look-behind instead of ``\\b`` where
  needed) and open-ended parts are only used where nothing follows them, so a
  crafted file such as "a-a-a-..." cannot make the regexes quadratic.
- A Problem names the line and the kind of credential and never contains any
  part of the matched text; messages are built from fixed strings only.
- Speed never changes what is found. A rule's regex is not run over the whole
  text (a leading ``\\b``, look-behind or ``(?i)`` stops ``re`` from searching
  for a literal prefix, so it would try every position). Instead each rule
  names anchors: literals that every one of its matches starts with (or, for
  URLs, ends its scheme with). All anchors are found together in a few passes,
  and the regex is tried with ``match`` only at those candidate starts, in
  order, skipping any inside the previous match. That returns exactly what
  ``finditer`` returns, provided the candidates include every position where
  the regex matches (an extra candidate only costs a failed ``match``) and no
  regex can match the empty string. ``_scan_reference`` is the plain
  ``finditer`` scan; the tests assert both give the same matches and problems.
  The regexes are tried at a subset of the positions finditer tries, and the
  anchor passes do bounded work per character, so scanning stays linear.
- Case-insensitive rules look for their anchors in a folded copy of the text of
  the same length, so offsets carry over; it maps every character that
  ``(?i)`` matches as an ASCII letter to that letter, including the four
  non-ASCII ones (U+0130, U+0131, U+017F, U+212A).
- Importing the package is cheap: no regex is compiled (``_regex``: on first use)
  and nothing is built for the search until the first scan (``engine``).
"""

from __future__ import annotations

from .engine import KIND, WITHHELD, redact_path, scan_message, scan_path, scan_secrets

__all__ = ["KIND", "WITHHELD", "redact_path", "scan_message", "scan_path", "scan_secrets"]
