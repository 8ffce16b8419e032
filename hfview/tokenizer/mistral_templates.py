"""llama.cpp's models/templates/Mistral-Small-3.2-24B-Instruct-2506.jinja and unsloth-mistral-Devstral-Small-2507.jinja
(llama.cpp, MIT licence) as data: the community chat templates the converter's _set_vocab_mistral writes from its own
tree for a v11 and a v13 Mistral tokenizer where it takes no chat_template.jinja (hfview/tokenizer/mistral.py). Kept
as strings so that an installed hfview carries them; tests/test_family_voxtral.py compares them with the pinned
converter's files byte for byte."""

TEMPLATES = {
    'Mistral-Small-3.2-24B-Instruct-2506.jinja': (
        '{%- set today = strftime_now("%Y-%m-%d") %}\n'
        '{%- set default_system_message = "You are Mistral Small 3, a Large Language Model (LLM) created by Mistral AI, a French startup headquartered in Paris.\\nYour knowledge base was last updated on 2023-10-01. The current date is " + today + ".\\n\\nWhen you\'re not sure about some information or when the user\'s request requires up-to-date or specific data, you must use the available tools to fetch the information. Do not hesitate to use tools whenever they can provide a more accurate or complete response. If no relevant tools are available, then clearly state that you don\'t have the information and avoid making up anything.\n'
        '\n'
        'If the user\'s question is not clear, ambiguous, or does not provide enough context for you to accurately answer the question, you do not try to answer it right away and you rather ask the user to clarify their request (e.g. \\"What are some good restaurants around me?\\" => \\"Where are you?\\" or \\"When is the next flight to Tokyo\\" => \\"Where do you travel from?\\").\n'
        'You are always very attentive to dates, and when asked about information at specific dates, you discard information that is at another date.\n'
        'You follow these instructions in all languages, and always respond to the user in the language they use or request.\n'
        'Next sections describe the capabilities that you have.\n'
        '\n'
        '# WEB BROWSING INSTRUCTIONS\n'
        '\n'
        'You cannot perform any web search or access internet to open URLs, links etc. If it seems like the user is expecting you to do so, you clarify the situation and ask the user to copy paste the text directly in the chat.\n'
        '\n'
        '# MULTI-MODAL INSTRUCTIONS\n'
        '\n'
        'You have the ability to read images, but you cannot generate images. You also cannot transcribe audio files or videos.\n'
        'You cannot read nor transcribe audio files or videos.\n'
        '\n'
        '# TOOL CALLING INSTRUCTIONS\n'
        '\n'
        'You may have access to tools that you can use to fetch information or perform actions. You must use these tools in the following situations:\n'
        '\n'
        '1. When the request requires up-to-date information.\n'
        '2. When the request requires specific data that you do not have in your knowledge base.\n'
        '3. When the request involves actions that you cannot perform without tools.\n'
        '\n'
        'Always prioritize using tools to provide the most accurate and helpful response. If tools are not available, inform the user that you cannot perform the requested action at the moment." %}\n'
        '\n'
        '{{- bos_token }}\n'
        '\n'
        '{%- set system_prompt = default_system_message %}\n'
        '{%- set loop_messages = messages %}\n'
        '\n'
        '{%- if not tools is defined %}\n'
        '    {%- set tools = none %}\n'
        '{%- endif %}\n'
        '\n'
        "{%- if messages|length > 0 and messages[0]['role'] == 'system' %}\n"
        "    {%- if messages[0]['content'] is string %}\n"
        "        {%- set system_prompt = messages[0]['content'] %}\n"
        '    {%- else %}\n'
        "        {%- set system_prompt = messages[0]['content'][0]['text'] %}\n"
        '    {%- endif %}\n'
        '    {%- set loop_messages = messages[1:] %}\n'
        '{%- endif %}\n'
        '\n'
        '{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}\n'
        '\n'
        '{%- set ns = namespace(index=0) %}\n'
        '{%- for message in loop_messages %}\n'
        '    {%- if not (message.role == "tool" or (message.get(\'tool_calls\'))) %}\n'
        '        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}\n'
        '            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}\n'
        '        {%- endif %}\n'
        '        {%- set ns.index = ns.index + 1 %}\n'
        '    {%- endif %}\n'
        '{%- endfor %}\n'
        '\n'
        "{{- '[SYSTEM_PROMPT]' + system_prompt + '[/SYSTEM_PROMPT]' }}\n"
        '\n'
        '{%- for message in loop_messages %}\n'
        "    {%- if message['role'] == 'system' %}\n"
        "        {%- if message['content'] is string %}\n"
        "            {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}\n"
        '        {%- else %}\n'
        "            {{- '[SYSTEM_PROMPT]' + message['content'][0]['text'] + '[/SYSTEM_PROMPT]' }}\n"
        '        {%- endif %}\n'
        "    {%- elif message['role'] == 'user' %}\n"
        '        {%- if tools is not none and (message == user_messages[-1]) %}\n'
        "            {{- '[AVAILABLE_TOOLS]' + tools|tojson + '[/AVAILABLE_TOOLS]' }}\n"
        '        {%- endif %}\n'
        "        {{- '[INST]' }}\n"
        "        {%- if message['content'] is string %}\n"
        "            {{- message['content'] }}\n"
        '        {%- else %}\n'
        "            {%- for block in message['content'] %}\n"
        "                {%- if block['type'] == 'text' %}\n"
        "                    {{- block['text'] }}\n"
        "                {%- elif block['type'] in ['image', 'image_url'] %}\n"
        "                    {{- '[IMG]' }}\n"
        '                {%- else %}\n'
        "                    {{- raise_exception('Only text and image blocks are supported in message content!') }}\n"
        '                {%- endif %}\n'
        '            {%- endfor %}\n'
        '        {%- endif %}\n'
        "        {{- '[/INST]' }}\n"
        "    {%- elif message['role'] == 'assistant' %}\n"
        "        {%- if message.get('tool_calls') %}\n"
        '            {%- for tool_call in message.tool_calls %}\n'
        "                {{- '[TOOL_CALLS]' + tool_call.function.name }}\n"
        '                {%- if not tool_call.id is defined or tool_call.id is not string or tool_call.id|length != 9 %}\n'
        '                    {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}\n'
        '                {%- endif %}\n'
        "                {{- '[CALL_ID]' + tool_call.id }}\n"
        "                {{- '[ARGS]' + tool_call['function']['arguments']|tojson }}\n"
        '            {%- endfor %}\n'
        '            {{- eos_token }}\n'
        "        {%- elif message['content'] is string %}\n"
        "            {{- message['content'] + eos_token }}\n"
        '        {%- else %}\n'
        "            {%- for block in message['content'] %}\n"
        "                {%- if block['type'] == 'text' %}\n"
        "                    {{- block['text'] }}\n"
        "                {%- elif block['type'] in ['image', 'image_url'] %}\n"
        "                    {{- '[IMG]' }}\n"
        '                {%- else %}\n'
        "                    {{- raise_exception('Only text and image blocks are supported in assistant content!') }}\n"
        '                {%- endif %}\n'
        '            {%- endfor %}\n'
        '            {{- eos_token }}\n'
        '        {%- endif %}\n'
        "    {%- elif message['role'] == 'tool_results' or message['role'] == 'tool' %}\n"
        '        {%- if message.content is defined and message.content.content is defined %}\n'
        '            {%- set content = message.content.content %}\n'
        '        {%- else %}\n'
        '            {%- set content = message.content %}\n'
        '        {%- endif %}\n'
        "        {%- if not message.tool_call_id is defined or message.tool_call_id is not string or message['tool_call_id']|length != 9 %}\n"
        '            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}\n'
        '        {%- endif %}\n'
        "        {{- '[TOOL_RESULTS]' + message.tool_call_id + '[TOOL_CONTENT]' + content|string + '[/TOOL_RESULTS]' }}\n"
        '    {%- else %}\n'
        "        {{- raise_exception('Only system, user, assistant, and tool roles are supported!') }}\n"
        '    {%- endif %}\n'
        '{%- endfor %}\n'
    ),
    'unsloth-mistral-Devstral-Small-2507.jinja': (
        '{#- Copyright 2025-present the Unsloth team. All rights reserved. #}\n'
        '{#- Licensed under the Apache License, Version 2.0 (the "License") #}\n'
        '{#- Edits made by Unsloth #}\n'
        '{%- set default_system_message = \'You are Devstral, a helpful agentic model trained by Mistral AI and using the OpenHands scaffold. You can interact with a computer to solve tasks.\\n\\n<ROLE>\\nYour primary role is to assist users by executing commands, modifying code, and solving technical problems effectively. You should be thorough, methodical, and prioritize quality over speed.\\n* If the user asks a question, like \\"why is X happening\\", don\\\'t try to fix the problem. Just give an answer to the question.\\n</ROLE>\\n\\n<EFFICIENCY>\\n* Each action you take is somewhat expensive. Wherever possible, combine multiple actions into a single action, e.g. combine multiple bash commands into one, using sed and grep to edit/view multiple files at once.\\n* When exploring the codebase, use efficient tools like find, grep, and git commands with appropriate filters to minimize unnecessary operations.\\n</EFFICIENCY>\\n\\n<FILE_SYSTEM_GUIDELINES>\\n* When a user provides a file path, do NOT assume it\\\'s relative to the current working directory. First explore the file system to locate the file before working on it.\\n* If asked to edit a file, edit the file directly, rather than creating a new file with a different filename.\\n* For global search-and-replace operations, consider using `sed` instead of opening file editors multiple times.\\n</FILE_SYSTEM_GUIDELINES>\\n\\n<CODE_QUALITY>\\n* Write clean, efficient code with minimal comments. Avoid redundancy in comments: Do not repeat information that can be easily inferred from the code itself.\\n* When implementing solutions, focus on making the minimal changes needed to solve the problem.\\n* Before implementing any changes, first thoroughly understand the codebase through exploration.\\n* If you are adding a lot of code to a function or file, consider splitting the function or file into smaller pieces when appropriate.\\n</CODE_QUALITY>\\n\\n<VERSION_CONTROL>\\n* When configuring git credentials, use \\"openhands\\" as the user.name and \\"openhands@all-hands.dev\\" as the user.email by default, unless explicitly instructed otherwise.\\n* Exercise caution with git operations. Do NOT make potentially dangerous changes (e.g., pushing to main, deleting repositories) unless explicitly asked to do so.\\n* When committing changes, use `git status` to see all modified files, and stage all files necessary for the commit. Use `git commit -a` whenever possible.\\n* Do NOT commit files that typically shouldn\\\'t go into version control (e.g., node_modules/, .env files, build directories, cache files, large binaries) unless explicitly instructed by the user.\\n* If unsure about committing certain files, check for the presence of .gitignore files or ask the user for clarification.\\n</VERSION_CONTROL>\\n\\n<PULL_REQUESTS>\\n* When creating pull requests, create only ONE per session/issue unless explicitly instructed otherwise.\\n* When working with an existing PR, update it with new commits rather than creating additional PRs for the same issue.\\n* When updating a PR, preserve the original PR title and purpose, updating description only when necessary.\\n</PULL_REQUESTS>\\n\\n<PROBLEM_SOLVING_WORKFLOW>\\n1. EXPLORATION: Thoroughly explore relevant files and understand the context before proposing solutions\\n2. ANALYSIS: Consider multiple approaches and select the most promising one\\n3. TESTING:\\n   * For bug fixes: Create tests to verify issues before implementing fixes\\n   * For new features: Consider test-driven development when appropriate\\n   * If the repository lacks testing infrastructure and implementing tests would require extensive setup, consult with the user before investing time in building testing infrastructure\\n   * If the environment is not set up to run tests, consult with the user first before investing time to install all dependencies\\n4. IMPLEMENTATION: Make focused, minimal changes to address the problem\\n5. VERIFICATION: If the environment is set up to run tests, test your implementation thoroughly, including edge cases. If the environment is not set up to run tests, consult with the user first before investing time to run tests.\\n</PROBLEM_SOLVING_WORKFLOW>\\n\\n<SECURITY>\\n* Only use GITHUB_TOKEN and other credentials in ways the user has explicitly requested and would expect.\\n* Use APIs to work with GitHub or other platforms, unless the user asks otherwise or your task requires browsing.\\n</SECURITY>\\n\\n<ENVIRONMENT_SETUP>\\n* When user asks you to run an application, don\\\'t stop if the application is not installed. Instead, please install the application and run the command again.\\n* If you encounter missing dependencies:\\n  1. First, look around in the repository for existing dependency files (requirements.txt, pyproject.toml, package.json, Gemfile, etc.)\\n  2. If dependency files exist, use them to install all dependencies at once (e.g., `pip install -r requirements.txt`, `npm install`, etc.)\\n  3. Only install individual packages directly if no dependency files are found or if only specific packages are needed\\n* Similarly, if you encounter missing dependencies for essential tools requested by the user, install them when possible.\\n</ENVIRONMENT_SETUP>\\n\\n<TROUBLESHOOTING>\\n* If you\\\'ve made repeated attempts to solve a problem but tests still fail or the user reports it\\\'s still broken:\\n  1. Step back and reflect on 5-7 different possible sources of the problem\\n  2. Assess the likelihood of each possible cause\\n  3. Methodically address the most likely causes, starting with the highest probability\\n  4. Document your reasoning process\\n* When you run into any major issue while executing a plan from the user, please don\\\'t try to directly work around it. Instead, propose a new plan and confirm with the user before proceeding.\\n</TROUBLESHOOTING>\' %}\n'
        '\n'
        '{{- bos_token }}\n'
        '\n'
        "{%- if messages[0]['role'] == 'system' %}\n"
        "    {%- if messages[0]['content'] is string %}\n"
        "        {%- set system_message = messages[0]['content'] %}\n"
        '    {%- else %}\n'
        "        {%- set system_message = messages[0]['content'][0]['text'] %}\n"
        '    {%- endif %}\n'
        '    {%- set loop_messages = messages[1:] %}\n'
        '{%- else %}\n'
        '    {%- set system_message = default_system_message %}\n'
        '    {%- set loop_messages = messages %}\n'
        '{%- endif %}\n'
        "{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}\n"
        '\n'
        '\n'
        '{#- Tool description appended ONLY to last user message. Edits made by Unsloth #}\n'
        '{#- Tool description appended also if last message is tool. Edits made by Unsloth #}\n'
        '{%- set tools_description = "" %}\n'
        '{%- set has_tools = false %}\n'
        '\n'
        '{%- if tools is defined and tools is not none and tools|length > 0 %}\n'
        '\n'
        '    {%- set has_tools = true %}\n'
        '    {%- set tools_description = "[AVAILABLE_TOOLS]" + (tools | tojson) + "[/AVAILABLE_TOOLS]" %}\n'
        '\n'
        '    {{- tools_description }}\n'
        '\n'
        '{%- endif %}\n'
        '\n'
        '{%- for message in loop_messages %}\n'
        "    {%- if message['role'] == 'user' %}\n"
        '\n'
        "        {%- if message['content'] is string %}\n"
        "            {{- '[INST]' + message['content'] + '[/INST]' }}\n"
        '        {%- else %}\n'
        "            {{- '[INST]' }}\n"
        "            {%- for block in message['content'] %}\n"
        "                {%- if block['type'] == 'text' %}\n"
        '\n'
        '                    {#- Original did not have content which is weird. Added by Un-sloth. #}\n'
        "                    {%- if block['text'] is defined %}\n"
        "                        {{- block['text'] }}\n"
        '                    {%- else %}\n'
        "                        {{- block['content'] }}\n"
        '                    {%- endif %}\n'
        '\n'
        "                {%- elif block['type'] in ['image', 'image_url'] %}\n"
        "                    {{- '[IMG]' }}\n"
        '                {%- else %}\n'
        "                    {{- raise_exception('Only text and image blocks are supported in message content!') }}\n"
        '                {%- endif %}\n'
        '            {%- endfor %}\n'
        "            {{- '[/INST]' }}\n"
        '        {%- endif %}\n'
        '\n'
        "    {%- elif message['role'] == 'system' %}\n"
        "        {%- if message['content'] is string %}\n"
        "            {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}\n"
        '        {%- else %}\n'
        "            {{- '[SYSTEM_PROMPT]' + message['content'][0]['text'] + '[/SYSTEM_PROMPT]' }}\n"
        '        {%- endif %}\n'
        '        \n'
        '\n'
        "    {%- elif message['role'] == 'assistant' %}\n"
        "        {%- if message['content'] is string %}\n"
        "            {{- message['content'] }}\n"
        '        {%- else %}\n'
        "            {{- message['content'][0]['text'] }}\n"
        '        {%- endif %}\n'
        '\n'
        '        {#- If User,Assistant,Tool,Tool we also need to append tools_description. Edits made by Unsloth #}\n'
        '\n'
        "        {%- if message['tool_calls'] is defined and message['tool_calls'] is not none %}\n"
        "            {%- for tool in message['tool_calls'] %}\n"
        "                {%- set arguments = tool['function']['arguments'] %}\n"
        '                {%- if arguments is not string %}\n'
        '                    {%- set arguments = arguments|tojson %}\n'
        '                {%- endif %}\n'
        '                {#- Must list tool calls AFTER assistant. Edits made by Un-sloth #}\n'
        '                {{- "[TOOL_CALLS]" + tool[\'function\'][\'name\'] + "[ARGS]" + arguments }}\n'
        '            {%- endfor %}\n'
        '        {%- endif %}\n'
        '\n'
        '        {{- eos_token }}\n'
        '\n'
        '    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}\n'
        '        {%- if message.content is defined and message.content.content is defined %}\n'
        '            {%- set content = message.content.content %}\n'
        '        {%- else %}\n'
        '            {%- set content = message.content %}\n'
        '        {%- endif %}\n'
        '        {{- "[TOOL_RESULTS]" + content|string + "[/TOOL_RESULTS]" }}\n'
        '\n'
        '    {%- else %}\n'
        "        {{- raise_exception('Only user, systemm assistant and tool roles are supported in the custom template made by Unsloth!') }}\n"
        '    {%- endif %}\n'
        '{%- endfor %}\n'
        '{#- Copyright 2025-present the Unsloth team. All rights reserved. #}\n'
        '{#- Licensed under the Apache License, Version 2.0 (the "License") #}'
    ),
}
