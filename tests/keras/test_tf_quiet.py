"""Silencing TensorFlow's native output redirects the process's file descriptors 1 and 2: two
threads doing it at once must not restore them in the wrong order."""
import os
import threading

from deeplite_like.backends.keras._tf import native_output_silenced


def _targets():
    return [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)]


def test_overlapping_silenced_blocks_in_two_threads_leave_the_descriptors_as_found():
    """Thread a enters, then b tries to enter; a leaves before b.

    Unserialised, b would save a's redirect as "the original" and put it back last, leaving the
    process writing into a's deleted temporary file. Serialised, b enters only after a left.
    """
    before = _targets()
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    inside_b = []

    def a():
        with native_output_silenced(quiet=True):
            a_in.set()
            b_in.wait(0.5)  # b cannot get in while a is: this times out
        a_out.set()

    def b():
        a_in.wait(30)
        with native_output_silenced(quiet=True):
            inside_b.append(a_out.is_set())
            b_in.set()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert inside_b == [True]  # b's block began after a's ended
    assert _targets() == before


def test_what_native_code_wrote_is_captured_and_the_descriptors_restored():
    before = _targets()
    with native_output_silenced(quiet=True) as captured:
        os.write(2, b"from C++\n")
    assert captured.text == "from C++\n" and _targets() == before
