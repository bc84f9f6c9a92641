"""errors.py: the error codes of lib/cdp_error.h and their phrases.

A CdpError carries the C library's code name (``"ECRC"``), its phrase as
cdp_strerror() gives it ("checksum mismatch") and a message in the form the
tools print: the subject quoted first, then the phrase.
"""

PHRASES = {
    "EINVAL": "invalid argument",
    "ENOMEM": "out of memory",
    "ERANGE": "number out of range",
    "ESYNTAX": "syntax error",
    "EMAGIC": "bad magic number (not a cdpool file)",
    "EVERSION": "unsupported format version",
    "ETRUNC": "truncated data",
    "ECRC": "checksum mismatch",
    "EFORMAT": "invalid or inconsistent field",
    "EOVERFLOW": "size overflow",
    "EZLIB": "compressed data is corrupt",
    "ELMDB": "lmdb database is missing a part",
    "EKEY": "invalid key",
    "EDUPKEY": "duplicate key",
    "ESHAPE": "shape, data type or band count differs",
    "EMISMATCH": "mismatch",
}


def escape(text):
    """cdp_msg_escape(): the control bytes of file text a message quotes
    made visible (a tab, CR, LF as \\t, \\r, \\n, any other below 0x20 and
    DEL as \\xHH), so a CR cannot hide what came before it on a terminal
    nor an LF split the one-line message."""
    named = {"\t": "\\t", "\r": "\\r", "\n": "\\n"}
    return "".join(named.get(c) or ("\\x%02x" % ord(c) if ord(c) < 0x20 or c == "\x7f" else c)
                   for c in text)


class CdpError(ValueError):
    """A file that a cdpool reader refuses.

    code is the name of the C error code (``"ECRC"``, ``"EFORMAT"``, ...),
    phrase its cdp_strerror() text, subject what was being read, line the
    1-based offending line of a pointer file (0 when it does not apply),
    record the key of a pool's record at fault (or None): the message is
    then cdp-train's "'POOL': record 'KEY': checksum mismatch"; message
    replaces the phrase where the C tools say more ("made for pool ...").
    """

    def __init__(self, code, subject, detail=None, line=0, record=None, message=None):
        self.code = code
        self.phrase = PHRASES[code]
        self.subject = subject
        self.detail = detail
        self.line = line
        self.record = record
        self.message = message
        text = "'%s': " % subject
        if line and not (message and code == "EDUPKEY"):
            text += "line %d: " % line
        if record is not None:
            text += "record '%s': " % record
        text += escape(message) if message else self.phrase
        if detail:
            text += " (%s)" % escape(str(detail))
        super().__init__(text)

    def __reduce__(self):
        # pickled by its fields: multiprocessing sends a worker's exception
        # back pickled, and Exception's default would call CdpError(text)
        return (type(self), (self.code, self.subject, self.detail, self.line, self.record,
                             self.message))
