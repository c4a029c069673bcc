"""Stand-in for Colab's google.colab, for the course's tests (tests/notebooks/test_08_keep_your_work.py).

Only what notebook 08 uses: `drive.mount` / `drive.flush_and_unmount` on a local folder, `userdata.get` of a
planted value, and the kernel class Colab starts its kernel with (as build/image_lane.py's stand-in).
"""
