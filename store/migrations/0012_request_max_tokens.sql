-- requests.max_tokens: the output limit the client sent with a request, NULL when it sent none. A replay refuses a
-- request for its size only when its prompt plus this (else one output token) cannot fit (replay/constraints.py).
ALTER TABLE requests ADD COLUMN max_tokens INTEGER;
