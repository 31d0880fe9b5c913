-- requests.images: how many images a request carries, and requests.image_tokens: the prompt tokens they become when
-- the trace knows it. 0 for a text request (NULL for rows stored before this column). in_tokens counts the text; a
-- replay adds the images' tokens to the prompt and prices the vision encoder on them (replay/plan.py).
ALTER TABLE requests ADD COLUMN images INTEGER;
ALTER TABLE requests ADD COLUMN image_tokens INTEGER;
