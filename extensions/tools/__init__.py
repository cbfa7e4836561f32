"""The pack's verl tools; each YAML under ``tool_configs/`` names one of these classes.

- ``python_exec.PythonExecTool``: runs the model's Python in ``sandbox.run_python``.
- ``calculator.CalculatorTool``: exact arithmetic over the expression's ``ast``.
- ``check_answer.CheckAnswerTool``: grades the final answer against the sample's ground truth.
- ``schema``: derives each tool's schema from its function, checks arguments and YAML config.
- ``sandbox`` / ``sandbox_child``: the two sides of the Python sandbox.
"""
