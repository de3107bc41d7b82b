"""MPIRunTimeout's message (no MPI): the run's own output, a traceback it printed included,
apart from the ranks' SIGUSR1 answers and their faulthandler stacks, identical stacks once."""

from __future__ import annotations

from mpicoded.launcher.timeout import MPIRunTimeout

OUTPUT = """\
[mpicoded] iteration 5/50
Traceback (most recent call last):
  File "job.py", line 3, in <module>
ValueError: boom
Current thread 0x00007f01 (most recent call first):
  File "/m/worker.py", line 344 in run
  File "/m/api.py", line 96 in run
[mpicoded] rank 2 (pid 6): worker 1 (epoch 0): idle
Thread 0x00007f02 (most recent call first):
  File "/m/worker.py", line 344 in run
  File "/m/api.py", line 96 in run
Current thread 0x00007f03 (most recent call first):
  File "/m/master.py", line 362 in pump
[mpicoded] rank 0 (pid 4): master: epoch 0, job 0 iteration 7 open
[mpicoded] rank 1 (pid 5): worker 0 (epoch 0): idle"""


def test_the_message_keeps_the_runs_own_output_apart_from_the_answers():
    message = str(MPIRunTimeout(150, OUTPUT, "123 ps line"))
    own, _, rest = message.partition("still running then:\n123 ps line\n")
    assert own == ("mpirun timed out after 150s; last output:\n[mpicoded] iteration 5/50\n"
                   'Traceback (most recent call last):\n  File "job.py", line 3, in <module>\n'
                   "ValueError: boom\n")
    where, _, stacks = rest.partition("their stacks, the same ones counted once:\n")
    assert where.splitlines()[1:] == [  # by rank
        "[mpicoded] rank 0 (pid 4): master: epoch 0, job 0 iteration 7 open",
        "[mpicoded] rank 1 (pid 5): worker 0 (epoch 0): idle",
        "[mpicoded] rank 2 (pid 6): worker 1 (epoch 0): idle"]
    assert stacks == ('2 thread(s):\n  File "/m/worker.py", line 344 in run\n'
                      '  File "/m/api.py", line 96 in run\n'
                      '1 thread(s):\n  File "/m/master.py", line 362 in pump')
