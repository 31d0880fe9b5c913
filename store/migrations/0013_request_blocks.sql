-- requests.hash_ids: the prompt's prefix blocks, in order (equal ids, equal prefixes), and requests.block_tokens: the
-- tokens per block. Both NULL for a request whose trace has no blocks: the replay then takes its recorded
-- cached_tokens; with blocks it replays each replica's prefix cache instead (replay/replica/cache.py).
ALTER TABLE requests ADD COLUMN hash_ids BIGINT[];
ALTER TABLE requests ADD COLUMN block_tokens INTEGER;
