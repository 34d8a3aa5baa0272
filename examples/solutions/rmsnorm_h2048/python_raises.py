"""python_raises: a Python solution of rmsnorm_h2048 that raises on every call.

Broken on purpose: the exception (with its traceback) becomes the evaluation's log.
Expected from `fib run`: RUNTIME_ERROR on every workload.
"""


def run(hidden_states, weight, output):
    raise ValueError("rmsnorm_h2048 python_raises: hidden_size %d is not supported"
                     % hidden_states.shape[-1])
