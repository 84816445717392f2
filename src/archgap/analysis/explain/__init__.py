"""From a crash log to its root cause: the log read into frames and evidence (logparse,
logevidence), the signature that recognises the error (match), the chain through the raising code
(chain), the causes a signature names and the facts that decide them (causes), the rule per kind of
error (rules), and the diagnosis that joins them with the fix engine's ranked fixes (diagnosis)."""
