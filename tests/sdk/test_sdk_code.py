# SPDX-License-Identifier: Apache-2.0
"""The Python SDK's code interpreter: run_code (state, callbacks, rich results, errors) and
contexts, through a real isolad (tests/integration/test_code_api.py goes wider)."""

import base64

import isola


def test_run_code_and_contexts(sb):
    seen = []
    ex = sb.run_code("n = 3\nprint('x')\nn * 14", on_stdout=seen.append, timeout=240)
    assert (ex.text, seen, ex.error) == ("42", ["x\n"], None)
    assert isinstance(ex.results[0], isola.Result) and ex.results[0].is_main_result
    ex = sb.run_code("import matplotlib.pyplot as plt\nplt.figure(figsize=(1, 1), dpi=50)\n"
                     "plt.plot([1])\nplt.show()")
    assert base64.b64decode([r.png for r in ex.results if r.png][0])[1:4] == b"PNG"
    assert sb.run_code("undefined_name").error.name == "NameError"
    ctx = sb.create_code_context(language="bash")
    assert ctx.language == "bash"
    assert sb.run_code("echo $((6 * 7))", context=ctx).logs.stdout == ["42\n"]
    sb.remove_code_context(ctx)
    assert ctx.id not in [c.id for c in sb.list_code_contexts()]
