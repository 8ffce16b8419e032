"""llama.cpp's models/templates/MiniMax-M1.jinja (llama.cpp, MIT licence) as data: the chat template the
converter's MiniMaxText01Model writes from its own tree where no chat_template.jinja lies beside the weights
(hfview/families/minimax_01.py). Kept as a string so that an installed hfview carries it."""

TEMPLATE = (
    "{{ '<begin_of_document>' -}}\n"
    '{%- if custom_tools is defined %}\n'
    '    {%- set tools = custom_tools %}\n'
    '{%- endif %}\n'
    '{%- if not tools is defined %}\n'
    '    {%- set tools = none %}\n'
    '{%- endif %}\n'
    '\n'
    '{#- Extract system message #}\n'
    "{% set ns = namespace(system_prompt='') -%}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- if messages[0]['content'] is string %}\n"
    "        {%- set ns.system_prompt = messages[0]['content']|trim %}\n"
    '    {%- else %}\n'
    "        {%- set ns.system_prompt = messages[0]['content'][0]['text']|trim %}\n"
    '    {%- endif %}\n'
    '    {%- set messages = messages[1:] %}\n'
    '{%- else %}\n'
    '    {%- if tools is not none %}\n'
    '        {%- set ns.system_prompt = "You are a helpful assistant created by Minimax based on MiniMax-M1 model." %}\n'
    '    {%- else %}\n'
    '        {%- set ns.system_prompt = "You are a helpful assistant created by Minimax based on MiniMax-M1 model." %}\n'
    '    {%- endif %}\n'
    '{%- endif %}\n'
    '\n'
    '{#- System message #}\n'
    "{%- if ns.system_prompt != '' %}\n"
    "{{ '<beginning_of_sentence>system ai_setting=assistant\\n' + ns.system_prompt + '<end_of_sentence>\\n' -}}\n"
    '{%- endif %}\n'
    '\n'
    '{#- Tools configuration #}\n'
    '{%- if tools is not none %}\n'
    "{{ '<beginning_of_sentence>system tool_setting=tools\\nYou are provided with these tools:\\n<tools>\\n' -}}\n"
    '{%- for tool in tools %}\n'
    "{{ tool | tojson ~ '\\n' -}}\n"
    '{%- endfor %}\n'
    '{{ \'</tools>\\n\\nIf you need to call tools, please respond with <tool_calls></tool_calls> XML tags, and provide tool-name and json-object of arguments, following the format below:\\n<tool_calls>\\n{"name": <tool-name>, "arguments": <args-json-object>}\\n...\\n</tool_calls><end_of_sentence>\\n\' -}}\n'
    '{%- endif %}\n'
    '\n'
    '{#- Process messages #}\n'
    '{%- for message in messages %}\n'
    "    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n"
    "        {%- if message['role'] == 'user' %}\n"
    "{{ '<beginning_of_sentence>user name=user\\n' -}}\n"
    "{%- if message['content'] is string %}\n"
    "{{ message['content']|trim -}}\n"
    '{%- else %}\n'
    "{%- for content in message['content'] %}\n"
    "{%- if content['type'] == 'text' %}\n"
    "{{ content['text']|trim -}}\n"
    '{%- endif %}\n'
    '{%- endfor %}\n'
    '{%- endif %}\n'
    "{{ '<end_of_sentence>\\n' -}}\n"
    "        {%- elif message['role'] == 'assistant' %}\n"
    "{{ '<beginning_of_sentence>ai name=assistant\\n' -}}\n"
    "{%- if message['content'] is string %}\n"
    "{{ message['content']|trim -}}\n"
    '{%- else %}\n'
    "{%- for content in message['content'] | selectattr('type', 'equalto', 'text') %}\n"
    "{{ content['text']|trim -}}\n"
    '{%- endfor %}\n'
    '{%- endif %}\n'
    "{{ '<end_of_sentence>\\n' -}}\n"
    '        {%- endif %}\n'
    "    {%- elif 'tool_calls' in message %}\n"
    "{{ '<beginning_of_sentence>ai name=assistant\\n<tool_calls>\\n' -}}\n"
    '{%- for tool_call in message.tool_calls %}\n'
    '{{ \'{"name": "\' + tool_call.function.name + \'", "arguments": \' + tool_call.function.arguments | tojson + \'}\\n\' -}}\n'
    '{%- endfor %}\n'
    "{{ '</tool_calls><end_of_sentence>\\n' -}}\n"
    '    {%- elif message.role == "tool" or message.role == "ipython" %}\n'
    "{{ '<beginning_of_sentence>tool name=tools\\n' -}}\n"
    '{%- if message.content is string %}\n'
    "{{ 'tool result: ' + message.content + '\\n\\n' -}}\n"
    '{%- else %}\n'
    "{%- for content in message['content'] %}\n"
    "{%- if content['type'] == 'text' %}\n"
    "{{ 'tool result: ' + content['text'] + '\\n\\n' -}}\n"
    "{%- elif content.get('name') %}\n"
    "{{ 'tool name: ' + content['name'] + '\\ntool result: ' + content['text'] + '\\n\\n' -}}\n"
    '{%- endif %}\n'
    '{%- endfor %}\n'
    '{%- endif %}\n'
    "{{ '<end_of_sentence>\\n' -}}\n"
    '    {%- endif %}\n'
    '{%- endfor %}\n'
    '\n'
    '{%- if add_generation_prompt %}\n'
    "{{ '<beginning_of_sentence>ai name=assistant\\n' -}}\n"
    '{%- endif %}'
)
