"""llama.cpp's models/templates/deepseek-ai-DeepSeek-V4.jinja and deepseek-ai-DeepSeek-V4-Flash-0731.jinja (llama.cpp,
MIT licence) as data: the chat templates the converter's DeepseekV4Model writes from its own tree, the second where
the checkpoint directory's name holds "0731" (hfview/families/deepseek_v4.py). Kept as strings so that an installed
hfview carries them."""

V4 = (
    '{%- if not add_generation_prompt is defined -%}\n'
    '  {%- set add_generation_prompt = false -%}\n'
    '{%- endif -%}\n'
    '{%- if not thinking is defined -%}\n'
    '  {%- if enable_thinking is defined -%}\n'
    '    {%- set thinking = enable_thinking -%}\n'
    '  {%- else -%}\n'
    '    {%- set thinking = false -%}\n'
    '  {%- endif -%}\n'
    '{%- endif -%}\n'
    '{%- if not drop_thinking is defined -%}\n'
    '  {%- set drop_thinking = true -%}\n'
    '{%- endif -%}\n'
    "{%- set dsml_token = '｜DSML｜' -%}\n"
    "{%- set thinking_start_token = '<think>' -%}\n"
    "{%- set thinking_end_token = '</think>' -%}\n"
    "{%- set reasoning_effort_max = 'Reasoning Effort: Absolute maximum with no shortcuts permitted.\\nYou MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\\nExplicitly write out your entire deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\\n\\n' -%}\n"
    "{%- set response_format_template = '## Response Format:\\n\\nYou MUST strictly adhere to the following schema to reply:\\n' -%}\n"
    '{%- set has_tools = false -%}\n'
    '{%- set tools_header = \'## Tools\\n\\nYou have access to a set of tools to help answer the user\\\'s question. You can invoke tools by writing a "<\' + dsml_token + \'tool_calls>" block like the following:\\n\\n<\' + dsml_token + \'tool_calls>\\n<\' + dsml_token + \'invoke name="$TOOL_NAME">\\n<\' + dsml_token + \'parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</\' + dsml_token + \'parameter>\\n...\\n</\' + dsml_token + \'invoke>\\n<\' + dsml_token + \'invoke name="$TOOL_NAME2">\\n...\\n</\' + dsml_token + \'invoke>\\n</\' + dsml_token + \'tool_calls>\\n\\nString parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.\\n\\nIf thinking_mode is enabled (triggered by \' + thinking_start_token + \'), you MUST output your complete reasoning inside \' + thinking_start_token + \'...\' + thinking_end_token + \' BEFORE any tool calls or final response.\\n\\nOtherwise, output directly after \' + thinking_end_token + \' with tool calls or final response.\\n\\n### Available Tool Schemas\\n\\n\' -%}\n'
    "{%- set tools_footer = '\\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\\n' -%}\n"
    "{%- set ns = namespace(system_prompt='', is_first_sp=true, has_tool_calls=false) -%}\n"
    '{%- for message in messages -%}\n'
    "  {%- if message['role'] == 'system' -%}\n"
    '    {%- if ns.is_first_sp -%}\n'
    "      {%- set ns.system_prompt = ns.system_prompt + (message['content'] or '') -%}\n"
    '      {%- set ns.is_first_sp = false -%}\n'
    '    {%- else -%}\n'
    "      {%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + (message['content'] or '') -%}\n"
    '    {%- endif -%}\n'
    '  {%- endif -%}\n'
    '{%- endfor -%}\n'
    '{%- if tools is defined and tools -%}\n'
    '  {%- set has_tools = true -%}\n'
    "  {%- set ts = namespace(schemas='') -%}\n"
    '  {%- for tool in tools -%}\n'
    "    {%- if tool['type'] == 'function' -%}\n"
    "      {%- set ts.schemas = ts.schemas + (tool['function'] | tojson) + '\\n' -%}\n"
    '    {%- endif -%}\n'
    '  {%- endfor -%}\n'
    '  {%- if ns.system_prompt -%}\n'
    "    {%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + tools_header + ts.schemas + tools_footer -%}\n"
    '  {%- else -%}\n'
    '    {%- set ns.system_prompt = tools_header + ts.schemas + tools_footer -%}\n'
    '  {%- endif -%}\n'
    '{%- endif -%}\n'
    '{%- if response_format is defined -%}\n'
    '  {%- if ns.system_prompt -%}\n'
    "    {%- set ns.system_prompt = ns.system_prompt + '\\n\\n' -%}\n"
    '  {%- endif -%}\n'
    '  {%- set ns.system_prompt = ns.system_prompt + response_format_template + (response_format | tojson) -%}\n'
    '{%- endif -%}\n'
    '{{- bos_token -}}\n'
    "{%- if messages and thinking and reasoning_effort is defined and reasoning_effort == 'max' -%}\n"
    '  {{- reasoning_effort_max -}}\n'
    '{%- endif -%}\n'
    '{{- ns.system_prompt -}}\n'
    '{%- set last_user_idx = namespace(value=-1) -%}\n'
    '{%- for message in messages -%}\n'
    "  {%- if message['role'] == 'user' or message['role'] == 'developer' or message['role'] == 'tool' -%}\n"
    '    {%- set last_user_idx.value = loop.index0 -%}\n'
    '  {%- endif -%}\n'
    '{%- endfor -%}\n'
    '{%- set state = namespace(in_user=false) -%}\n'
    '{%- for message in messages -%}\n'
    "  {%- if message['role'] == 'tool' -%}\n"
    '    {%- set ns.has_tool_calls = true -%}\n'
    '  {%- endif -%}\n'
    '{%- endfor -%}\n'
    '{%- for message in messages -%}\n'
    "  {%- if message['role'] == 'user' or message['role'] == 'developer' -%}\n"
    '    {%- if state.in_user -%}\n'
    "      {{- '\\n\\n' -}}\n"
    '    {%- else -%}\n'
    "      {{- '<｜User｜>' -}}\n"
    '      {%- set state.in_user = true -%}\n'
    '    {%- endif -%}\n'
    "    {{- message['content'] or '' -}}\n"
    "  {%- elif message['role'] == 'tool' -%}\n"
    '    {%- if state.in_user -%}\n'
    "      {{- '\\n\\n' -}}\n"
    '    {%- else -%}\n'
    "      {{- '<｜User｜>' -}}\n"
    '      {%- set state.in_user = true -%}\n'
    '    {%- endif -%}\n'
    "    {{- '<tool_result>' + (message['content'] or '') + '</tool_result>' -}}\n"
    "  {%- elif message['role'] == 'assistant' -%}\n"
    '    {%- set state.in_user = false -%}\n'
    "    {{- '<｜Assistant｜>' -}}\n"
    '    {%- set is_after_last_user = loop.index0 > last_user_idx.value -%}\n'
    '    {%- set keep_reasoning = thinking and ((not drop_thinking) or has_tools or is_after_last_user or ns.has_tool_calls) -%}\n'
    '    {%- if keep_reasoning -%}\n'
    '      {{- thinking_start_token -}}\n'
    "      {%- if message['reasoning_content'] is defined and message['reasoning_content'] -%}\n"
    "        {{- message['reasoning_content'] -}}\n"
    '      {%- endif -%}\n'
    '      {{- thinking_end_token -}}\n'
    '    {%- else -%}\n'
    '      {{- thinking_end_token -}}\n'
    '    {%- endif -%}\n'
    "    {%- if message['content'] is defined and message['content'] -%}\n"
    "      {{- message['content'] -}}\n"
    '    {%- endif -%}\n'
    "    {%- if message['tool_calls'] -%}\n"
    "      {{- '\\n\\n<' + dsml_token + 'tool_calls>\\n' -}}\n"
    "      {%- for tool in message['tool_calls'] -%}\n"
    "        {%- set func = tool['function'] -%}\n"
    '        {{- \'<\' + dsml_token + \'invoke name="\' + func[\'name\'] + \'">\\n\' -}}\n'
    "        {%- set args = func['arguments'] -%}\n"
    '        {%- if args is string -%}\n'
    '          {%- set args = args | from_json -%}\n'
    '        {%- endif -%}\n'
    '        {%- for key, val in args.items() -%}\n'
    '          {%- if val is string -%}\n'
    '            {{- \'<\' + dsml_token + \'parameter name="\' + key + \'" string="true">\' + val + \'</\' + dsml_token + \'parameter>\\n\' -}}\n'
    '          {%- else -%}\n'
    '            {{- \'<\' + dsml_token + \'parameter name="\' + key + \'" string="false">\' + (val | tojson) + \'</\' + dsml_token + \'parameter>\\n\' -}}\n'
    '          {%- endif -%}\n'
    '        {%- endfor -%}\n'
    '        {%- if not args -%}\n'
    "          {{- '\\n' -}}\n"
    '        {%- endif -%}\n'
    "        {{- '</' + dsml_token + 'invoke>\\n' -}}\n"
    '      {%- endfor -%}\n'
    "      {{- '</' + dsml_token + 'tool_calls>' -}}\n"
    '    {%- endif -%}\n'
    "    {{- '<｜end▁of▁sentence｜>' -}}\n"
    '  {%- endif -%}\n'
    '{%- endfor -%}\n'
    '{%- if add_generation_prompt -%}\n'
    "  {{- '<｜Assistant｜>' -}}\n"
    '  {%- if thinking -%}\n'
    '    {{- thinking_start_token -}}\n'
    '  {%- else -%}\n'
    '    {{- thinking_end_token -}}\n'
    '  {%- endif -%}\n'
    '{%- endif -%}\n'
)

FLASH_0731 = (
    '{%- if not add_generation_prompt is defined -%}\n'
    '  {%- set add_generation_prompt = false -%}\n'
    '{%- endif -%}\n'
    '{%- if not thinking is defined -%}\n'
    '  {%- if enable_thinking is defined -%}\n'
    '    {%- set thinking = enable_thinking -%}\n'
    '  {%- else -%}\n'
    '    {%- set thinking = false -%}\n'
    '  {%- endif -%}\n'
    '{%- endif -%}\n'
    '{%- if not drop_thinking is defined -%}\n'
    '  {%- set drop_thinking = true -%}\n'
    '{%- endif -%}\n'
    "{%- set dsml_token = '｜DSML｜' -%}\n"
    "{%- set thinking_start_token = '<think>' -%}\n"
    "{%- set thinking_end_token = '</think>' -%}\n"
    "{%- set reasoning_effort_high = 'Reasoning Effort: Absolute maximum with no shortcuts permitted.\\nYou MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\\nExplicitly write out your entire deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\\n\\n' -%}\n"
    "{%- set reasoning_effort_max = 'Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\\nYou MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively decompose the problem into its most fundamental components, trace every causal chain to its root, and resolve the underlying cause rather than any surface symptom.\\nDo not stop reasoning until you have independently verified the solution from multiple angles and are certain that no assumption remains unchecked and no error remains undiscovered.\\n\\n' -%}\n"
    "{%- set response_format_template = '## Response Format:\\n\\nYou MUST strictly adhere to the following schema to reply:\\n' -%}\n"
    '{%- set has_tools = false -%}\n'
    '{%- set tools_header = \'## Tools\\n\\nYou have access to a set of tools to help answer the user\\\'s question. You can invoke tools by writing a "<\' + dsml_token + \'tool_calls>" block like the following:\\n\\n<\' + dsml_token + \'tool_calls>\\n<\' + dsml_token + \'invoke name="$TOOL_NAME">\\n<\' + dsml_token + \'parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</\' + dsml_token + \'parameter>\\n...\\n</\' + dsml_token + \'invoke>\\n<\' + dsml_token + \'invoke name="$TOOL_NAME2">\\n...\\n</\' + dsml_token + \'invoke>\\n</\' + dsml_token + \'tool_calls>\\n\\nString parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.\\n\\nIf thinking_mode is enabled (triggered by \' + thinking_start_token + \'), you MUST output your complete reasoning inside \' + thinking_start_token + \'...\' + thinking_end_token + \' BEFORE any tool calls or final response.\\n\\nOtherwise, output directly after \' + thinking_end_token + \' with tool calls or final response.\\n\\n### Available Tool Schemas\\n\\n\' -%}\n'
    "{%- set tools_footer = '\\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\\n' -%}\n"
    "{%- set ns = namespace(system_prompt='', is_first_sp=true, has_tool_calls=false) -%}\n"
    '{%- for message in messages -%}\n'
    "  {%- if message['role'] == 'system' -%}\n"
    '    {%- if ns.is_first_sp -%}\n'
    "      {%- set ns.system_prompt = ns.system_prompt + (message['content'] or '') -%}\n"
    '      {%- set ns.is_first_sp = false -%}\n'
    '    {%- else -%}\n'
    "      {%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + (message['content'] or '') -%}\n"
    '    {%- endif -%}\n'
    '  {%- endif -%}\n'
    '{%- endfor -%}\n'
    '{%- if tools is defined and tools -%}\n'
    '  {%- set has_tools = true -%}\n'
    "  {%- set ts = namespace(schemas='') -%}\n"
    '  {%- for tool in tools -%}\n'
    "    {%- if tool['type'] == 'function' -%}\n"
    "      {%- set ts.schemas = ts.schemas + (tool['function'] | tojson) + '\\n' -%}\n"
    '    {%- endif -%}\n'
    '  {%- endfor -%}\n'
    '  {%- if ns.system_prompt -%}\n'
    "    {%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + tools_header + ts.schemas + tools_footer -%}\n"
    '  {%- else -%}\n'
    '    {%- set ns.system_prompt = tools_header + ts.schemas + tools_footer -%}\n'
    '  {%- endif -%}\n'
    '{%- endif -%}\n'
    '{%- if response_format is defined -%}\n'
    '  {%- if ns.system_prompt -%}\n'
    "    {%- set ns.system_prompt = ns.system_prompt + '\\n\\n' -%}\n"
    '  {%- endif -%}\n'
    '  {%- set ns.system_prompt = ns.system_prompt + response_format_template + (response_format | tojson) -%}\n'
    '{%- endif -%}\n'
    '{{- bos_token -}}\n'
    "{%- if messages and thinking and reasoning_effort is defined and reasoning_effort == 'high' -%}\n"
    '  {{- reasoning_effort_high -}}\n'
    "{%- elif messages and thinking and reasoning_effort is defined and reasoning_effort == 'max' -%}\n"
    '  {{- reasoning_effort_max -}}\n'
    '{%- endif -%}\n'
    '{{- ns.system_prompt -}}\n'
    '{%- set last_user_idx = namespace(value=-1) -%}\n'
    '{%- for message in messages -%}\n'
    "  {%- if message['role'] == 'user' or message['role'] == 'developer' or message['role'] == 'tool' -%}\n"
    '    {%- set last_user_idx.value = loop.index0 -%}\n'
    '  {%- endif -%}\n'
    '{%- endfor -%}\n'
    '{%- set state = namespace(in_user=false) -%}\n'
    '{%- for message in messages -%}\n'
    "  {%- if message['role'] == 'tool' -%}\n"
    '    {%- set ns.has_tool_calls = true -%}\n'
    '  {%- endif -%}\n'
    '{%- endfor -%}\n'
    '{%- for message in messages -%}\n'
    "  {%- if message['role'] == 'user' or message['role'] == 'developer' -%}\n"
    '    {%- if state.in_user -%}\n'
    "      {{- '\\n\\n' -}}\n"
    '    {%- else -%}\n'
    "      {{- '<｜User｜>' -}}\n"
    '      {%- set state.in_user = true -%}\n'
    '    {%- endif -%}\n'
    "    {{- message['content'] or '' -}}\n"
    "  {%- elif message['role'] == 'tool' -%}\n"
    '    {%- if state.in_user -%}\n'
    "      {{- '\\n\\n' -}}\n"
    '    {%- else -%}\n'
    "      {{- '<｜User｜>' -}}\n"
    '      {%- set state.in_user = true -%}\n'
    '    {%- endif -%}\n'
    "    {{- '<tool_result>' + (message['content'] or '') + '</tool_result>' -}}\n"
    "  {%- elif message['role'] == 'assistant' -%}\n"
    '    {%- set state.in_user = false -%}\n'
    "    {{- '<｜Assistant｜>' -}}\n"
    '    {%- set is_after_last_user = loop.index0 > last_user_idx.value -%}\n'
    '    {%- set keep_reasoning = thinking and ((not drop_thinking) or has_tools or is_after_last_user or ns.has_tool_calls) -%}\n'
    '    {%- if keep_reasoning -%}\n'
    '      {{- thinking_start_token -}}\n'
    "      {%- if message['reasoning_content'] is defined and message['reasoning_content'] -%}\n"
    "        {{- message['reasoning_content'] -}}\n"
    '      {%- endif -%}\n'
    '      {{- thinking_end_token -}}\n'
    '    {%- else -%}\n'
    '      {{- thinking_end_token -}}\n'
    '    {%- endif -%}\n'
    "    {%- if message['content'] is defined and message['content'] -%}\n"
    "      {{- message['content'] -}}\n"
    '    {%- endif -%}\n'
    "    {%- if message['tool_calls'] -%}\n"
    "      {{- '\\n\\n<' + dsml_token + 'tool_calls>\\n' -}}\n"
    "      {%- for tool in message['tool_calls'] -%}\n"
    "        {%- set func = tool['function'] -%}\n"
    '        {{- \'<\' + dsml_token + \'invoke name="\' + func[\'name\'] + \'">\\n\' -}}\n'
    "        {%- set args = func['arguments'] -%}\n"
    '        {%- if args is string -%}\n'
    '          {%- set args = args | from_json -%}\n'
    '        {%- endif -%}\n'
    '        {%- for key, val in args.items() -%}\n'
    '          {%- if val is string -%}\n'
    '            {{- \'<\' + dsml_token + \'parameter name="\' + key + \'" string="true">\' + val + \'</\' + dsml_token + \'parameter>\\n\' -}}\n'
    '          {%- else -%}\n'
    '            {{- \'<\' + dsml_token + \'parameter name="\' + key + \'" string="false">\' + (val | tojson) + \'</\' + dsml_token + \'parameter>\\n\' -}}\n'
    '          {%- endif -%}\n'
    '        {%- endfor -%}\n'
    '        {%- if not args -%}\n'
    "          {{- '\\n' -}}\n"
    '        {%- endif -%}\n'
    "        {{- '</' + dsml_token + 'invoke>\\n' -}}\n"
    '      {%- endfor -%}\n'
    "      {{- '</' + dsml_token + 'tool_calls>' -}}\n"
    '    {%- endif -%}\n'
    "    {{- '<｜end▁of▁sentence｜>' -}}\n"
    '  {%- endif -%}\n'
    '{%- endfor -%}\n'
    '{%- if add_generation_prompt -%}\n'
    "  {{- '<｜Assistant｜>' -}}\n"
    '  {%- if thinking -%}\n'
    '    {{- thinking_start_token -}}\n'
    '  {%- else -%}\n'
    '    {{- thinking_end_token -}}\n'
    '  {%- endif -%}\n'
    '{%- endif -%}\n'
)
