"""llama.cpp's models/templates/Kimi-K3.jinja (llama.cpp, MIT licence) as data: the chat template the converter's
KimiK3Model writes from its own tree where the checkpoint states none (K3 renders chats in Python, encoding_k3.py,
and ships no Jinja template; hfview/families/kimi_k3.py). Kept as a string so that an installed hfview carries it."""

TEMPLATE = (
    '{%- macro escape_attr(value) -%}\n'
    '{{- value|string|replace(\'&\', \'&amp;\')|replace(\'"\', \'&quot;\') -}}\n'
    '{%- endmacro -%}\n'
    '\n'
    '{%- macro open_tag(tag, attrs=[]) -%}\n'
    "{{- '<|open|>' + tag -}}\n"
    '{%- for attr in attrs -%}\n'
    '{{- \' \' + attr[0] + \'="\' -}}{{- escape_attr(attr[1]) -}}{{- \'"\' -}}\n'
    '{%- endfor -%}\n'
    "{{- '<|sep|>' -}}\n"
    '{%- endmacro -%}\n'
    '\n'
    '{%- macro close_tag(tag) -%}\n'
    "{{- '<|close|>' + tag + '<|sep|>' -}}\n"
    '{%- endmacro -%}\n'
    '\n'
    '{%- macro next_image(state) -%}\n'
    '{%- if image_prompts is defined and image_prompts is not none -%}\n'
    '    {%- if state.image_index >= image_prompts|length -%}\n'
    "        {{- raise_exception('More image placeholders than image prompts.') -}}\n"
    '    {%- endif -%}\n'
    '    {{- image_prompts[state.image_index] -}}\n'
    '    {%- set state.image_index = state.image_index + 1 -%}\n'
    '{%- else -%}\n'
    "    {{- '<|kimi_image_placeholder|>' -}}\n"
    '{%- endif -%}\n'
    '{%- endmacro -%}\n'
    '\n'
    '{%- macro render_text(text, state) -%}\n'
    '{%- set text = text|string -%}\n'
    "{%- if image_prompts is defined and image_prompts is not none and '<|kimi_image_placeholder|>' in text -%}\n"
    "    {%- set parts = text.split('<|kimi_image_placeholder|>') -%}\n"
    '    {%- for part in parts -%}\n'
    '        {{- part -}}\n'
    '        {%- if not loop.last -%}{{- next_image(state) -}}{%- endif -%}\n'
    '    {%- endfor -%}\n'
    '{%- else -%}\n'
    '    {{- text -}}\n'
    '{%- endif -%}\n'
    '{%- endmacro -%}\n'
    '\n'
    '{%- macro render_content(content, state) -%}\n'
    '{%- if content is string -%}\n'
    '    {{- render_text(content, state) -}}\n'
    '{%- elif content is not none and content is defined -%}\n'
    '    {%- for part in content -%}\n'
    "        {%- if part.type in ['image', 'image_url'] -%}\n"
    '            {{- next_image(state) -}}\n'
    '        {%- else -%}\n'
    '            {{- render_text(part.text, state) -}}\n'
    '        {%- endif -%}\n'
    '    {%- endfor -%}\n'
    '{%- endif -%}\n'
    '{%- endmacro -%}\n'
    '\n'
    '{%- macro internal_system_message(message_type, body) -%}\n'
    "{{- open_tag('message', [('role', 'system'), ('type', message_type)]) -}}\n"
    '{{- body|trim -}}\n'
    "{{- close_tag('message') -}}\n"
    "{{- '<|end_of_msg|>' -}}\n"
    '{%- endmacro -%}\n'
    '\n'
    '{%- macro json_sorted(value) -%}\n'
    '{#- tojson has no sort_keys, so sort each mapping level with dictsort to match the\n'
    '    reference implementation. Array order is kept as-is. -#}\n'
    '{%- if value is mapping -%}\n'
    "{{- '{' -}}\n"
    '{%- for key, item in value|dictsort -%}\n'
    "{%- if not loop.first -%}{{- ',' -}}{%- endif -%}\n"
    "{{- key|tojson(ensure_ascii=false) -}}{{- ':' -}}{{- json_sorted(item) -}}\n"
    '{%- endfor -%}\n'
    "{{- '}' -}}\n"
    '{%- elif value is string or value is number or value is boolean or value is none -%}\n'
    '{{- value|tojson(ensure_ascii=false) -}}\n'
    '{%- else -%}\n'
    "{{- '[' -}}\n"
    '{%- for item in value -%}\n'
    "{%- if not loop.first -%}{{- ',' -}}{%- endif -%}\n"
    '{{- json_sorted(item) -}}\n'
    '{%- endfor -%}\n'
    "{{- ']' -}}\n"
    '{%- endif -%}\n'
    '{%- endmacro -%}\n'
    '\n'
    '{%- macro render_tool_declare(tool_list, dynamic=false) -%}\n'
    "{{- open_tag('message', [('role', 'system'), ('type', 'tool-declare')]) -}}\n"
    '{%- if dynamic -%}\n'
    "{{- '## New Tools Available\\nThe system dynamically extends the toolset via lazy-loading.\\nYou have access to all existing and extended tools.\\nHere are the specs for the extended tools.\\n\\n```json\\n' -}}\n"
    '{%- else -%}\n'
    "{{- '# Tools\\nHere are the available tools, described in JSONSchema.\\n\\n```json\\n' -}}\n"
    '{%- endif -%}\n'
    '{{- json_sorted(tool_list) -}}\n'
    "{{- '\\n```' -}}\n"
    "{{- close_tag('message') -}}\n"
    "{{- '<|end_of_msg|>' -}}\n"
    '{%- endmacro -%}\n'
    '\n'
    '{%- macro xtml_type(value) -%}\n'
    '{%- if value is boolean -%}boolean\n'
    '{%- elif value is none -%}null\n'
    '{%- elif value is number -%}number\n'
    '{%- elif value is string -%}string\n'
    '{%- elif value is mapping -%}object\n'
    '{%- else -%}array\n'
    '{%- endif -%}\n'
    '{%- endmacro -%}\n'
    '\n'
    '{%- macro xtml_value(value) -%}\n'
    '{%- if value is string -%}\n'
    '{{- value -}}\n'
    '{%- else -%}\n'
    '{{- value|tojson(ensure_ascii=false) -}}\n'
    '{%- endif -%}\n'
    '{%- endmacro -%}\n'
    '\n'
    '{%- macro render_assistant(message, state) -%}\n'
    '{%- if thinking -%}\n'
    "    {%- set reasoning_content = message.get('reasoning_content') or message.get('reasoning') -%}\n"
    "    {{- open_tag('think') -}}\n"
    '    {%- if reasoning_content is not none and reasoning_content|string|trim -%}\n'
    '        {{- render_text(reasoning_content, state) -}}\n'
    '    {%- endif -%}\n'
    "    {{- close_tag('think') -}}\n"
    '{%- endif -%}\n'
    "{{- open_tag('response') -}}\n"
    "{{- render_content(message.get('content'), state) -}}\n"
    "{{- close_tag('response') -}}\n"
    "{%- set tool_calls = message.get('tool_calls') -%}\n"
    '{%- if tool_calls -%}\n'
    "    {{- open_tag('tools') -}}\n"
    '    {%- for tool_call in tool_calls -%}\n'
    '        {%- if tool_call is not mapping -%}\n'
    "            {{- raise_exception('Kimi K3 tool calls must be mappings.') -}}\n"
    '        {%- endif -%}\n'
    '        {%- set fn = tool_call.function if tool_call.function is defined and tool_call.function is mapping else tool_call -%}\n'
    "        {%- if fn.get('name') is none -%}\n"
    "            {{- raise_exception('Kimi K3 tool calls require a function name.') -}}\n"
    '        {%- endif -%}\n'
    "        {{- open_tag('call', [('tool', fn.name), ('index', loop.index)]) -}}\n"
    "        {%- set arguments = fn.get('arguments', {}) -%}\n"
    "        {%- set json_block = fn.get('_xtml_json_block') -%}\n"
    '        {%- if json_block is not none -%}\n'
    "            {{- open_tag('json', [('type', 'object')]) -}}\n"
    '            {{- render_text(json_block, state) -}}\n'
    "            {{- close_tag('json') -}}\n"
    '        {%- elif arguments is mapping -%}\n'
    '            {%- for key, value in arguments.items() -%}\n'
    "                {{- open_tag('argument', [('key', key), ('type', xtml_type(value))]) -}}\n"
    '                {{- render_text(xtml_value(value), state) -}}\n'
    "                {{- close_tag('argument') -}}\n"
    '            {%- endfor -%}\n'
    '        {%- elif arguments is string and arguments|trim -%}\n'
    "            {{- open_tag('json', [('type', 'object')]) -}}\n"
    '            {{- render_text(arguments, state) -}}\n'
    "            {{- close_tag('json') -}}\n"
    '        {%- elif arguments is not none and arguments is not string -%}\n'
    "            {{- raise_exception('Kimi K3 tool call arguments must be a mapping or a JSON object string.') -}}\n"
    '        {%- endif -%}\n'
    "        {{- close_tag('call') -}}\n"
    '    {%- endfor -%}\n'
    "    {{- close_tag('tools') -}}\n"
    '{%- endif -%}\n'
    '{%- endmacro -%}\n'
    '\n'
    '{%- macro render_tool_message(message, state, resolved_name=none) -%}\n'
    '{%- set state.tool_index = state.tool_index + 1 -%}\n'
    '{%- if resolved_name is not none -%}\n'
    '    {%- set tool_name = resolved_name -%}\n'
    "{%- elif 'tool' in message -%}\n"
    "    {%- set tool_name = message.get('tool') -%}\n"
    '{%- else -%}\n'
    "    {%- set tool_name = message.get('name') -%}\n"
    '{%- endif -%}\n'
    '{%- if tool_name is none and state.tool_calls is not none and state.tool_index <= state.tool_calls|length -%}\n'
    '    {%- set fallback_call = state.tool_calls[state.tool_index - 1] -%}\n'
    '    {%- set fallback_fn = fallback_call.function if fallback_call.function is defined and fallback_call.function is mapping else fallback_call -%}\n'
    '    {%- set tool_name = fallback_fn.name -%}\n'
    '{%- endif -%}\n'
    '{%- if tool_name is none -%}\n'
    "    {{- raise_exception('Kimi K3 tool messages need a resolvable tool name: carry `tool`/`name`, or match a preceding assistant tool_call by order.') -}}\n"
    '{%- endif -%}\n'
    "{{- open_tag('message', [('role', 'tool'), ('tool', tool_name), ('index', state.tool_index)]) -}}\n"
    "{{- render_content(message.get('content'), state) -}}\n"
    "{{- close_tag('message') -}}\n"
    "{{- '<|end_of_msg|>' -}}\n"
    '{%- endmacro -%}\n'
    '\n'
    '{%- if thinking is undefined -%}\n'
    '    {%- set thinking = true -%}\n'
    '{%- endif -%}\n'
    '{%- if thinking_effort is undefined -%}\n'
    "    {%- set thinking_effort = 'max' -%}\n"
    '{%- endif -%}\n'
    "{%- if thinking and thinking_effort is not none and thinking_effort not in ['low', 'high', 'max'] -%}\n"
    "    {{- raise_exception('Unsupported thinking_effort=' + thinking_effort|string + '; supported values are low, high, and max.') -}}\n"
    '{%- endif -%}\n'
    '\n'
    '{%- set state = namespace(image_index=0, tool_calls=none, tool_index=0, response_schema=none) -%}\n'
    '\n'
    '{%- if tools is defined and tools -%}\n'
    '    {{- render_tool_declare(tools) -}}\n'
    '{%- endif -%}\n'
    '\n'
    "{%- if thinking and thinking_effort in ['low', 'high', 'max'] -%}\n"
    '    {{- internal_system_message(\n'
    "        'thinking-effort',\n"
    "        '`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), supported values include `low`, `medium`, `high`, and `max`.\\nNow the system is invoked with `thinking_effort=' + thinking_effort|string + '`.'\n"
    '    ) -}}\n'
    '{%- endif -%}\n'
    '\n'
    '{%- for message in messages -%}\n'
    '    {%- if message is mapping -%}\n'
    "        {%- if 'role' not in message -%}\n"
    "            {{- raise_exception('Kimi K3 messages require a role.') -}}\n"
    "        {%- elif message.role == 'user' -%}\n"
    "            {%- set attrs = [('role', 'user')] -%}\n"
    "            {%- if message.get('name') -%}{%- set attrs = attrs + [('name', message.name)] -%}{%- endif -%}\n"
    "            {{- open_tag('message', attrs) -}}\n"
    "            {{- render_content(message.get('content'), state) -}}\n"
    "            {{- close_tag('message') -}}\n"
    "            {{- '<|end_of_msg|>' -}}\n"
    "        {%- elif message.role == 'system' and message.get('tools') -%}\n"
    '            {{- render_tool_declare(message.tools, dynamic=true) -}}\n'
    "        {%- elif message.role == 'system' -%}\n"
    "            {%- set attrs = [('role', 'system')] -%}\n"
    "            {%- if message.get('name') -%}{%- set attrs = attrs + [('name', message.name)] -%}{%- endif -%}\n"
    "            {{- open_tag('message', attrs) -}}\n"
    "            {{- render_content(message.get('content'), state) -}}\n"
    "            {{- close_tag('message') -}}\n"
    "            {{- '<|end_of_msg|>' -}}\n"
    "        {%- elif message.role == 'assistant' -%}\n"
    "            {%- set state.tool_calls = message.get('tool_calls') -%}\n"
    '            {%- set state.tool_index = 0 -%}\n'
    "            {%- set attrs = [('role', 'assistant')] -%}\n"
    "            {%- if message.get('name') -%}{%- set attrs = attrs + [('name', message.name)] -%}{%- endif -%}\n"
    "            {{- open_tag('message', attrs) -}}\n"
    '            {{- render_assistant(message, state) -}}\n'
    "            {{- close_tag('message') -}}\n"
    "            {{- '<|end_of_msg|>' -}}\n"
    "        {%- elif message.role == 'tool' and (loop.first or messages[loop.index0 - 1].role != 'tool') -%}\n"
    '            {%- set run = namespace(tool_messages=[], resolved_count=0) -%}\n'
    '            {%- for candidate in messages[loop.index0:] -%}\n'
    "                {%- if candidate is not mapping or candidate.role != 'tool' -%}{%- break -%}{%- endif -%}\n"
    '                {%- set run.tool_messages = run.tool_messages + [candidate] -%}\n'
    "                {%- set call_id = candidate.get('tool_call_id', candidate.get('id')) -%}\n"
    '                {%- set match = namespace(found=false) -%}\n'
    '                {%- if call_id is not none and state.tool_calls is not none -%}\n'
    '                    {%- for tool_call in state.tool_calls -%}\n'
    "                        {%- if not match.found and tool_call is mapping and tool_call.get('id') is not none and tool_call.get('id')|string == call_id|string -%}\n"
    '                            {%- set match.found = true -%}\n'
    '                        {%- endif -%}\n'
    '                    {%- endfor -%}\n'
    '                {%- endif -%}\n'
    '                {%- if match.found -%}{%- set run.resolved_count = run.resolved_count + 1 -%}{%- endif -%}\n'
    '            {%- endfor -%}\n'
    '            {%- if run.tool_messages|length > 0 and run.resolved_count == run.tool_messages|length -%}\n'
    '                {%- set emitted = namespace(ids=[]) -%}\n'
    '                {%- for tool_call in state.tool_calls -%}\n'
    "                    {%- if tool_call is mapping and tool_call.get('id') is not none and tool_call.get('id')|string not in emitted.ids -%}\n"
    "                        {%- set emitted.ids = emitted.ids + [tool_call.get('id')|string] -%}\n"
    '                        {%- set fn = tool_call.function if tool_call.function is defined and tool_call.function is mapping else tool_call -%}\n'
    '                        {%- for tool_message in run.tool_messages -%}\n'
    "                            {%- set result_id = tool_message.get('tool_call_id', tool_message.get('id')) -%}\n"
    "                            {%- if result_id is not none and result_id|string == tool_call.get('id')|string -%}\n"
    "                                {{- render_tool_message(tool_message, state, fn.get('name')) -}}\n"
    '                            {%- endif -%}\n'
    '                        {%- endfor -%}\n'
    '                    {%- endif -%}\n'
    '                {%- endfor -%}\n'
    '            {%- else -%}\n'
    '                {%- for tool_message in run.tool_messages -%}\n'
    '                    {{- render_tool_message(tool_message, state) -}}\n'
    '                {%- endfor -%}\n'
    '            {%- endif -%}\n'
    '        {%- endif -%}\n'
    '    {%- endif -%}\n'
    '{%- endfor -%}\n'
    '\n'
    "{%- if tool_choice is defined and tool_choice == 'required' -%}\n"
    "    {{- internal_system_message('tool-choice', 'The system is invoked with `tool_choice=required`.\\nYou MUST call tools in the next message.') -}}\n"
    "{%- elif tool_choice is defined and tool_choice == 'none' -%}\n"
    "    {{- internal_system_message('tool-choice', 'The system is invoked with `tool_choice=none`.\\nYou MUST NOT call any tools in the next message.') -}}\n"
    '{%- endif -%}\n'
    '\n'
    '{%- if response_schema is defined -%}\n'
    '    {%- set state.response_schema = response_schema -%}\n'
    "{%- elif response_format is defined and response_format is mapping and response_format.get('json_schema') is not none -%}\n"
    "    {%- set schema_wrapper = response_format.get('json_schema') -%}\n"
    "    {%- if schema_wrapper is mapping and 'schema' in schema_wrapper -%}\n"
    "        {%- set state.response_schema = schema_wrapper.get('schema') -%}\n"
    "    {%- elif schema_wrapper is mapping and 'json_schema' in schema_wrapper -%}\n"
    "        {%- set state.response_schema = schema_wrapper.get('json_schema') -%}\n"
    '    {%- else -%}\n'
    '        {%- set state.response_schema = schema_wrapper -%}\n'
    '    {%- endif -%}\n'
    '{%- endif -%}\n'
    '\n'
    '{%- set response_format_type = none -%}\n'
    '{%- if response_format is defined and response_format is mapping -%}\n'
    "    {%- set response_format_type = response_format.get('type') -%}\n"
    '{%- elif response_format is defined -%}\n'
    '    {%- set response_format_type = response_format -%}\n'
    '{%- endif -%}\n'
    "{%- if response_format_type == 'json_object' -%}\n"
    '    {{- internal_system_message(\n'
    "        'response-format',\n"
    "        'The system is invoked with `response_format=json_object`.\\nYour response must be raw JSON data without markdown code blocks (```json) or any additional formatting.'\n"
    '    ) -}}\n'
    "{%- elif response_format_type == 'json_schema' -%}\n"
    '    {{- internal_system_message(\n'
    "        'response-format',\n"
    "        'The system is invoked with `response_format=json_schema`.\\nYour response must be raw JSON data without markdown code blocks (```json) or any additional formatting.\\nThe JSON data must match the following schema:\\n```json\\n' + json_sorted(state.response_schema) + '\\n```'\n"
    '    ) -}}\n'
    '{%- endif -%}\n'
    '\n'
    '{%- if add_generation_prompt -%}\n'
    "    {{- open_tag('message', [('role', 'assistant')]) -}}\n"
    "    {{- open_tag('think' if thinking else 'response') -}}\n"
    '{%- endif -%}\n'
    '\n'
    '{%- if image_prompts is defined and image_prompts is not none and state.image_index != image_prompts|length -%}\n'
    "    {{- raise_exception('image prompt count ' + image_prompts|length|string + ' != consumed placeholder count ' + state.image_index|string) -}}\n"
    '{%- endif -%}\n'
    '\n'
)
