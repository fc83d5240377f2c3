"""
``kos_local.image.edit_python``, how an image's build edits the Python of a package it
installed (the amphora's agent, the cloud's Octavia worker): every edit finds the text of
the release it was made for, or none is made and the build stops at its step, naming the
file and the release; the edited modules' stale bytecode goes.
"""

import pytest
from kos_local import amphora
from kos_local.image import Build, BuildFailed, edit_python

EDITS = [("usr/lib/python3/dist-packages/pkg/a.py", "x = 1\n", "x = 2\n"),
         ("usr/lib/python3/dist-packages/pkg/b.py", "y = 1\n", "y = 2\n")]


def test_the_edits_are_made_together_or_the_build_stops_naming_the_release(tmp_path):
    a, b = (tmp_path / rel for rel, _, _ in EDITS)
    a.parent.mkdir(parents=True)
    a.write_text("x = 1\n")
    b.write_text("y = 1  # another release\n")
    stale = a.parent / "__pycache__" / "a.cpython-311.pyc"
    stale.parent.mkdir()
    stale.write_bytes(b"old")
    log = tmp_path / "build.log"
    log.write_text("")
    build = Build(amphora.layer(), tmp_path, log)

    with pytest.raises(BuildFailed) as err:
        edit_python(build, "the step", EDITS, "Octavia 11.0.0")
    assert "failed at step 'the step'" in err.value.problem
    assert f"/{EDITS[1][0]} is not the Octavia 11.0.0 kos edits" in err.value.problem
    assert a.read_text() == "x = 1\n" and stale.exists()

    b.write_text("y = 1\n")
    edit_python(build, "the step", EDITS, "Octavia 11.0.0")
    assert (a.read_text(), b.read_text()) == ("x = 2\n", "y = 2\n") and not stale.exists()
    # a second build of the layer starts from the package's files again: an edited file
    # is not the release's text
    with pytest.raises(BuildFailed):
        edit_python(build, "the step", EDITS, "Octavia 11.0.0")
