#!/usr/bin/python3
# Installed as /usr/local/sbin/ebtables-kos, the `ebtables` alternative of kos's rehearsal
# cloud image.
"""
ebtables-nft (1.8.9, Debian 12) cannot delete a rule by its specification when the rule
uses ``--among-src`` ("RULE_DELETE failed (Invalid argument)"), and this kernel has no
legacy ebtables to fall back on. Neutron's Linux bridge agent deletes its MAC anti-spoofing
rules exactly that way whenever a port is updated, fails, and retries forever, so no other
port gets plugged. This wrapper deletes such a rule by its number instead (the rule as
``ebtables -L --Ln`` prints it); everything else goes to ebtables-nft unchanged.
"""

import os
import subprocess
import sys

REAL = "/usr/sbin/ebtables-nft"


def main(argv):
    if "-D" in argv and "--among-src" in argv:
        i = argv.index("-D")
        head, chain, spec = argv[:i], argv[i + 1], argv[i + 2:]
        listing = subprocess.run([REAL, *head, "-L", chain, "--Ln"], capture_output=True,
                                 text=True)
        wanted = " ".join(spec)
        for line in listing.stdout.splitlines():
            number, _, rule = line.strip().partition(" ")
            if number.isdigit() and rule.strip() == wanted:
                os.execv(REAL, [REAL, *head, "-D", chain, number])
        print(f"ebtables-kos: no rule '{wanted}' in chain {chain}", file=sys.stderr)
        return 1
    os.execv(REAL, [REAL, *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
