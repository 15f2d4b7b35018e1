/** A multipart/form-data body, parsed whole (the simulator buffers request bodies). */
export interface FormPart {
  name: string;
  filename?: string;
  contentType?: string;
  data: Buffer;
}

export function parseMultipart(body: Buffer, contentType: string | undefined): FormPart[] | undefined {
  const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType ?? '');
  if (!/^multipart\/form-data/i.test(contentType ?? '') || !m) return undefined;
  const delimiter = Buffer.from(`--${m[1] ?? m[2]}`);
  const parts: FormPart[] = [];
  let pos = body.indexOf(delimiter);
  if (pos === -1) return undefined;
  for (;;) {
    pos += delimiter.length;
    if (body.toString('latin1', pos, pos + 2) === '--') return parts;
    pos += 2; // CRLF after the delimiter
    const headEnd = body.indexOf('\r\n\r\n', pos);
    const next = body.indexOf(delimiter, pos);
    if (headEnd === -1 || next === -1) return undefined;
    const headers = body.toString('utf8', pos, headEnd);
    const disposition = /content-disposition:[^\r\n]*/i.exec(headers)?.[0] ?? '';
    const name = /\bname="([^"]*)"/i.exec(disposition)?.[1];
    if (name === undefined) return undefined;
    const filename = /\bfilename="([^"]*)"/i.exec(disposition)?.[1];
    const type = /content-type:\s*([^\r\n]+)/i.exec(headers)?.[1];
    parts.push({
      name,
      ...(filename !== undefined ? { filename } : {}),
      ...(type ? { contentType: type.trim() } : {}),
      data: body.subarray(headEnd + 4, next - 2),
    });
    pos = next;
  }
}
