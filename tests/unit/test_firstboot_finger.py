"""The minion key fingerprint a server's first boot prints on its console (and kos checks the
key the master receives against) is the one Salt computes for the same key file."""

import re
import subprocess
from pathlib import Path

import salt.crypt
import salt.utils.crypt

TEMPLATE = Path(__file__).resolve().parents[2] / "terraform" / "cloud-init" / "kos-firstboot.sh.tftpl"


def minion_finger(path):
    text = TEMPLATE.read_text()
    body = re.search(r"# kos-minion-finger-begin\n(.*)# kos-minion-finger-end", text, re.S)[1]
    assert "${" not in body and "%{" not in body  # Terraform renders it unchanged
    res = subprocess.run(["bash", "-c", body + 'minion_finger "$1"', "finger", str(path)],
                         capture_output=True, text=True, check=True)
    return res.stdout.strip()


def test_the_console_fingerprint_is_salts_own(tmp_path):
    pub = tmp_path / "minion.pub"
    pub.write_text(salt.crypt.gen_keys(2048)[1])
    assert minion_finger(pub) == salt.utils.crypt.pem_finger(str(pub), sum_type="sha256")
    assert re.fullmatch(r"[0-9a-f]{2}(:[0-9a-f]{2}){31}", minion_finger(pub))


def test_a_key_file_not_yet_whole_gives_no_fingerprint(tmp_path):
    pub = tmp_path / "minion.pub"
    assert minion_finger(pub) == ""
    whole = salt.crypt.gen_keys(2048)[1]
    pub.write_text(whole[: len(whole) // 2])
    assert minion_finger(pub) == ""
