export namespace desktop {
	
	export class Autotest {
	    prompt: string;
	    stopAfter: number;
	
	    static createFrom(source: any = {}) {
	        return new Autotest(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.prompt = source["prompt"];
	        this.stopAfter = source["stopAfter"];
	    }
	}

}

export namespace service {
	
	export class Estimate {
	    ctx: number;
	    kv: string;
	    weights: number;
	    kvBytes: number;
	    scratch: number;
	    overhead: number;
	    total: number;
	    budget: number;
	    verdict: string;
	    maxCtx: number;
	
	    static createFrom(source: any = {}) {
	        return new Estimate(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.ctx = source["ctx"];
	        this.kv = source["kv"];
	        this.weights = source["weights"];
	        this.kvBytes = source["kvBytes"];
	        this.scratch = source["scratch"];
	        this.overhead = source["overhead"];
	        this.total = source["total"];
	        this.budget = source["budget"];
	        this.verdict = source["verdict"];
	        this.maxCtx = source["maxCtx"];
	    }
	}
	export class Message {
	    role: string;
	    content: string;
	
	    static createFrom(source: any = {}) {
	        return new Message(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.role = source["role"];
	        this.content = source["content"];
	    }
	}
	export class Model {
	    name: string;
	    path: string;
	    arch: string;
	    backend: string;
	    ctx: number;
	    ctxTrain: number;
	    kv: string;
	    slots: number;
	    template: string;
	    templateProblem?: string;
	    memoryBytes: number;
	    demo: boolean;
	
	    static createFrom(source: any = {}) {
	        return new Model(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.name = source["name"];
	        this.path = source["path"];
	        this.arch = source["arch"];
	        this.backend = source["backend"];
	        this.ctx = source["ctx"];
	        this.ctxTrain = source["ctxTrain"];
	        this.kv = source["kv"];
	        this.slots = source["slots"];
	        this.template = source["template"];
	        this.templateProblem = source["templateProblem"];
	        this.memoryBytes = source["memoryBytes"];
	        this.demo = source["demo"];
	    }
	}
	export class Prepare {
	    label: string;
	    done: number;
	    total: number;
	
	    static createFrom(source: any = {}) {
	        return new Prepare(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.label = source["label"];
	        this.done = source["done"];
	        this.total = source["total"];
	    }
	}
	export class SendRequest {
	    messages: Message[];
	    prompt?: string;
	    maxTokens?: number;
	
	    static createFrom(source: any = {}) {
	        return new SendRequest(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.messages = this.convertValues(source["messages"], Message);
	        this.prompt = source["prompt"];
	        this.maxTokens = source["maxTokens"];
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	export class Status {
	    state: string;
	    error?: string;
	    model?: Model;
	    busy: boolean;
	    running: number;
	    prepare?: Prepare;
	
	    static createFrom(source: any = {}) {
	        return new Status(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.state = source["state"];
	        this.error = source["error"];
	        this.model = this.convertValues(source["model"], Model);
	        this.busy = source["busy"];
	        this.running = source["running"];
	        this.prepare = this.convertValues(source["prepare"], Prepare);
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}

}

